/* The program tests/check_static_link.cmake builds with the README's static-linking line
 * against a fresh install: a softmax through the tensor kernels and a tiny generated task
 * through HDF5, so the archive and its dependencies are all linked. Prints the softmax's
 * first value and the file's sequence length; exit 1 on any error. */
#include <stdio.h>

#include "lookback.h"

int main(void)
{
    const int64_t shape[2] = {1, 3};
    const double x[3] = {0.0, 1.0, 2.0};
    lb_tensor *t = lb_tensor_from_doubles(LB_FLOAT64, 2, shape, x);
    lb_tensor *s = lb_tensor_from_doubles(LB_FLOAT64, 2, shape, x);
    if (!t || !s) {
        fprintf(stderr, "tensor: %s\n", lb_last_error());
        return 1;
    }
    lb_k_softmax(t, s, 0);
    const int64_t first[2] = {0, 0};
    printf("softmax %.6f\n", lb_tensor_get(s, first)); /* e^0 / (e^0 + e^1 + e^2) = 0.090031 */
    lb_tensor_free(t);
    lb_tensor_free(s);

    lb_task_options task;
    lb_task_options_default(LB_TASK_PARITY, &task);
    task.seq_len = 12;
    task.n_train = 4;
    task.n_val = 2;
    task.n_test = 2;
    if (lb_task_generate(&task, "parity.h5", NULL, NULL) != LB_OK) {
        fprintf(stderr, "generate: %s\n", lb_last_error());
        return 1;
    }
    lb_dataset *data = lb_dataset_open("parity.h5");
    if (!data) {
        fprintf(stderr, "open: %s\n", lb_last_error());
        return 1;
    }
    printf("seq_len %lld\n", (long long)lb_dataset_seq_len(data));
    lb_dataset_close(data);
    return 0;
}
