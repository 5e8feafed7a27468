/* lookback: tensors, reverse-mode autograd, attention and training in C. */
#ifndef LOOKBACK_H
#define LOOKBACK_H
#include "tensor/error.h"
#include "tensor/tensor.h"
#include "tensor/rng.h"
#endif
