/* Internal to data/: the table of generator options, shared by the command-line
 * parser (tasks.c), the HDF5 writer (generate.c) and the reader (dataset.c). */
#ifndef LB_DATA_OPTIONS_H
#define LB_DATA_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "data/tasks.h"

typedef enum lb_option_type {
    LB_OPT_INT,  /* int64_t field */
    LB_OPT_FLAG, /* int64_t field holding 0 or 1 */
    LB_OPT_SEED, /* uint64_t field */
    LB_OPT_REAL  /* double field */
} lb_option_type;

typedef struct lb_option_spec {
    const char *name;  /* attribute name; the command line spells it --name-with-hyphens */
    const char *alias; /* a shorter command-line name ("train" for n_train), or NULL */
    lb_option_type type;
    size_t offset;     /* into lb_task_options */
    double min, max;   /* inclusive range (LB_OPT_INT, LB_OPT_REAL) */
    int auto_ok;       /* accepts LB_OPTION_AUTO */
    unsigned tasks;    /* bit k: applies to task k */
    const char *help;
} lb_option_spec;

/* The table, `*count` entries. */
const lb_option_spec *lb_option_table(int *count);
/* The entry named `key` (its name or alias; underscores or hyphens, optional leading
 * "--"), or NULL. */
const lb_option_spec *lb_option_find(const char *key);
/* The command-line spelling of a name or key: "seq_len", "--seq_len", "seq-len" all
 * give "--seq-len" (truncated to size). Returns buf. */
char *lb_option_flag(const char *key, char *buf, size_t size);
/* A real number as the shortest text that reads back to it ("1e-06", "0.01", "16"). */
char *lb_option_real_str(double value, char *buf, size_t size);
int lb_option_applies(const lb_option_spec *spec, lb_task_kind task);

/* Field access as int64 (INT, FLAG), uint64 (SEED) or double (REAL). */
int64_t lb_option_get_int(const lb_task_options *opt, const lb_option_spec *spec);
void lb_option_set_int(lb_task_options *opt, const lb_option_spec *spec, int64_t value);
uint64_t lb_option_get_seed(const lb_task_options *opt, const lb_option_spec *spec);
void lb_option_set_seed(lb_task_options *opt, const lb_option_spec *spec, uint64_t value);
double lb_option_get_real(const lb_task_options *opt, const lb_option_spec *spec);
void lb_option_set_real(lb_task_options *opt, const lb_option_spec *spec, double value);

/* Checks one value of an LB_OPT_INT / LB_OPT_FLAG (check_int) or LB_OPT_REAL
 * (check_real) option against its range (and auto). With file NULL the value came
 * from the command line: LB_ERR_VALUE "option --seq-len: 1 is outside [2, 1048576]".
 * Otherwise it is an attribute of that file: LB_ERR_FORMAT
 * "FILE: attribute 'seq_len' = 1 is outside [2, 1048576]". */
lb_status lb_option_check_int(const lb_option_spec *spec, int64_t value, const char *file);
lb_status lb_option_check_real(const lb_option_spec *spec, double value, const char *file);

/* lb_task_options_resolve, with messages naming the options as attributes of `file`
 * ("FILE: the option attributes are inconsistent: max_distance 99 exceeds ...") when
 * file is not NULL (LB_ERR_FORMAT), or as command-line options when it is NULL. */
lb_status lb_task_options_check(lb_task_options *opt, const char *file);

#endif
