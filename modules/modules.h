#pragma once
// Umbrella header: Value, TensorDict, nn::Module and every module.
#include "modules/activation.h"
#include "modules/attention.h"
#include "modules/container.h"
#include "modules/conv.h"
#include "modules/dropout.h"
#include "modules/embedding.h"
#include "modules/linear.h"
#include "modules/module.h"
#include "modules/normalization.h"
#include "modules/pooling.h"
#include "modules/tensordict.h"
#include "modules/value.h"
