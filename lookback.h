/* lookback: tensors, reverse-mode autograd, attention models and training in C.
 * One include for users of the installed library (pkg-config --cflags --libs lookback):
 * every public header but data/h5io.h, the HDF5 helpers, which needs <hdf5.h> and is
 * included on its own. The fast path's headers (the headers of kernels/, tensor/pool.h, tensor/isa.h,
 * tensor/threads.h) are not part of it: they are installed under
 * include/lookback/advanced/ for programs that tune the kernels. */
#ifndef LOOKBACK_H
#define LOOKBACK_H

#include "autograd/autograd.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "data/arrays.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/events.h"
#include "data/loader.h"
#include "data/output.h"
#include "data/results.h"
#include "data/tasks.h"
#include "data/text.h"
#include "data/token_ids.h"
#include "layers/attention.h"
#include "layers/conv.h"
#include "layers/family.h"
#include "layers/kv_cache.h"
#include "layers/ffn.h"
#include "layers/generate.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "layers/model.h"
#include "layers/norm.h"
#include "layers/params.h"
#include "layers/positional.h"
#include "layers/sample.h"
#include "layers/stream.h"
#include "layers/transformer.h"
#include "optim/clip.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "tensor/blas.h"
#include "tensor/clock.h"
#include "tensor/names.h"
#include "tensor/error.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"
#include "train/cost.h"
#include "train/distributed.h"
#include "train/metrics.h"
#include "train/predict.h"
#include "train/score.h"
#include "train/trainer.h"

#endif
