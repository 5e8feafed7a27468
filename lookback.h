/* lookback: tensors, reverse-mode autograd, attention models and training in C.
 * One include for users of the installed library (pkg-config --cflags --libs lookback):
 * every public header but data/h5io.h, the HDF5 helpers, which needs <hdf5.h> and is
 * included on its own. */
#ifndef LOOKBACK_H
#define LOOKBACK_H

#include "tensor/error.h"
#include "tensor/tensor.h"
#include "tensor/rng.h"
#include "tensor/kernels.h"
#include "tensor/blas.h"
#include "tensor/threads.h"
#include "tensor/pool.h"
#include "tensor/kernels_attention.h"
#include "tensor/kernels_lstm.h"
#include "tensor/kernels_conv.h"
#include "tensor/kernels_stream.h"
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
#include "data/output.h"
#include "train/trainer.h"
#include "train/distributed.h"

#endif
