#pragma once
// Umbrella header of the vmap layer: the transform, the rules, functional_vmap.
#include "vmap/functional_vmap.h"
#include "vmap/rules/rules.h"
#include "vmap/transform.h"
