#pragma once
// td's engine: tensors, ops, random numbers and the batching hook.
#include "engine/batching.h"
#include "engine/dispatch.h"
#include "engine/dtype.h"
#include "engine/errors.h"
#include "engine/kernels/isa.h"
#include "engine/ops.h"
#include "engine/parallel.h"
#include "engine/random.h"
#include "engine/scalar.h"
#include "engine/shape.h"
#include "engine/storage.h"
#include "engine/tensor.h"
