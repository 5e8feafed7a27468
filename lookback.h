/* lookback: tensors, reverse-mode autograd, attention models and training in C.
 * One include for users of the installed library (pkg-config --cflags --libs lookback). */
#ifndef LOOKBACK_H
#define LOOKBACK_H

#include "tensor/error.h"
#include "tensor/tensor.h"
#include "tensor/rng.h"
#include "tensor/kernels.h"
#include "tensor/blas.h"
#include "tensor/threads.h"
#include "tensor/pool.h"
#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/gradcheck.h"
#include "layers/params.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/ffn.h"
#include "layers/attention.h"
#include "layers/positional.h"
#include "layers/transformer.h"
#include "layers/lstm.h"
#include "layers/conv.h"
#include "layers/model.h"
#include "layers/stream.h"
#include "optim/optim.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "data/tasks.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "train/trainer.h"
#include "train/distributed.h"

#endif
