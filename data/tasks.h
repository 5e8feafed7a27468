/* Synthetic long-range-dependency tasks and their generator.
 *
 * Seven tasks, each described with its exact recipe, chance level and purpose in
 * docs/data.md:
 *   spike   (default) a stream of sensor events; one token binds a sensor to its
 *           reading; the last event is an alarm naming a sensor; the target is that
 *           sensor's reading. Solvable by content alone (no positional encoding).
 *   recall  multi-query associative recall (Arora et al. 2023, "Zoology", MQAR).
 *   copy    copy memory (Hochreiter & Schmidhuber 1997; Arjovsky et al. 2016), with
 *           a selective variant (Gu & Dao 2023, "Mamba", selective copying).
 *   adding  the adding problem (Hochreiter & Schmidhuber 1997), real-valued inputs.
 *   local   a control task whose answer depends on the last few tokens only.
 *   parity  sequential state tracking: is the count of a marked symbol odd?
 *           (Deletang et al. 2023, "Neural Networks and the Chomsky Hierarchy").
 *   modsum  sequential state tracking: the sum of every symbol mod K, asked by a
 *           query token at the end (the additive core of Deletang et al. 2023's
 *           modular arithmetic and cycle navigation tasks).
 *
 * Token conventions for every token task: id 0 is PAD (never a real event), targets
 * of -100 (LB_IGNORE_INDEX) are ignored, as in torch.nn.CrossEntropyLoss.
 *
 * Determinism: a file is a pure function of its options (seed included), identical
 * on every machine and thread count. Each split draws from its own stream derived
 * from the seed and the split's name, and each sequence from its own stream derived
 * from the split's stream and its index, so the sizes of the other splits never
 * change a split's contents. All draws come from lb_rng (tensor/rng.h).
 */
#ifndef LB_DATA_TASKS_H
#define LB_DATA_TASKS_H

#include "tensor/api.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tensor/error.h"

LB_API_BEGIN

enum {
    LB_DATA_FORMAT_VERSION = 1, /* root attribute format_version of files written here */
    LB_IGNORE_INDEX = -100,     /* per-position target that is not scored */
    LB_PAD_ID = 0,              /* token id reserved for padding in every token task */
    LB_OPTION_AUTO = -1,        /* value of an option resolved from the others */
    /* The longest sequence a data file stores, in positions: a generated task's seq_len is
     * in [2, LB_DATA_MAX_SEQ_LEN], a CSV event file's windows in [1, LB_DATA_MAX_SEQ_LEN];
     * the reader refuses a file claiming more. (A text corpus stores a token stream and
     * takes its window when it is read: lb_dataset_set_seq_len.) */
    LB_DATA_MAX_SEQ_LEN = 1 << 20
};

typedef enum lb_task_kind {
    LB_TASK_SPIKE = 0,
    LB_TASK_RECALL,
    LB_TASK_COPY,
    LB_TASK_ADDING,
    LB_TASK_LOCAL,
    LB_TASK_PARITY,
    LB_TASK_MODSUM,
    LB_TASK_COUNT
} lb_task_kind;

/* Every generator option. Each field is also a root attribute of the HDF5 file (same
 * name) when it applies to the task; lb_task_print_help lists names, defaults and
 * ranges. Fields marked "auto" accept LB_OPTION_AUTO and are filled in by
 * lb_task_options_resolve. */
typedef struct lb_task_options {
    lb_task_kind task;
    int64_t seq_len;         /* T: positions per sequence, padding included */
    int64_t variable_length; /* 0/1: lengths drawn from [min_length, T], PAD after */
    int64_t min_length;      /* shortest sequence (auto: T, or ceil(T/2) if variable) */
    int64_t min_distance;    /* spike, adding: clue-to-query distance range (auto) */
    int64_t max_distance;
    int64_t noise_types;     /* spike, recall: number of distinct noise tokens */
    int64_t sensors;         /* spike: S sensors, each spiking once */
    int64_t readings;        /* spike: K possible readings = num_classes */
    int64_t pairs;           /* recall: key-value pairs per sequence */
    int64_t queries;         /* recall: keys queried per sequence (auto: pairs) */
    int64_t key_vocab;       /* recall: distinct key tokens */
    int64_t value_vocab;     /* recall: distinct value tokens = num_classes */
    double power_a;          /* recall: query gaps g drawn with density ~ g^(a-1) */
    int64_t copy_symbols;    /* copy: symbols to copy */
    int64_t alphabet;        /* copy, local, parity: symbol alphabet size */
    int64_t selective;       /* copy: 0/1, scatter the symbols among blanks */
    int64_t blank_targets;   /* copy: 0/1, every other position's target is the blank class */
    int64_t window;          /* local: the target sums the last `window` symbols */
    int64_t classes;         /* local: target modulus = num_classes */
    int64_t modulus;         /* modsum: K, symbols 0..K-1 summed mod K = num_classes */
    int64_t n_train, n_val, n_test; /* split sizes (sequences) */
    uint64_t seed;
} lb_task_options;

/* Name of a task ("spike", ...), NULL for an invalid kind. */
const char *lb_task_name(lb_task_kind task);

/* Every task name as English text, "spike, recall, ..., parity or modsum", into buf
 * (truncated to size - 1 bytes, always NUL-terminated); returns buf. The one list
 * that help and error messages print, so a new task appears everywhere. */
char *lb_task_names_text(char *buf, size_t size);

/* Parses a task name (exact, lower case). LB_ERR_VALUE naming the known tasks
 * when unknown. */
lb_status lb_task_parse_name(const char *name, lb_task_kind *out);

/* Fills *opt with the defaults of `task` (see lb_task_print_help). An invalid kind
 * falls back to LB_TASK_SPIKE. */
void lb_task_options_default(lb_task_kind task, lb_task_options *opt);

/* Sets one option from text, as given on a command line: key "seq_len",
 * "seq-len", "--seq-len" are the same, and "train", "val", "test" are short for
 * "n_train", "n_val", "n_test"; value is a whole number, a real (power_a), "auto"
 * for auto options, or 0/1/true/false/yes/no/on/off for flags. The key "task" is
 * refused (choose the task with lb_task_options_default first).
 * Errors (LB_ERR_VALUE), one line starting with the option as a user types it:
 * "option --seq-len: 'abc' is not a whole number", unknown key (with a hint when it
 * is a known option of another task), value NULL, garbage or trailing characters,
 * overflow, a non-finite real, value outside the option's range (reals printed with
 * %g). *opt is unchanged on error. */
lb_status lb_task_set_option(lb_task_options *opt, const char *key, const char *value);

/* Fills the auto options and checks every option and their combinations (e.g.
 * max_distance <= min_length - 1). LB_ERR_VALUE naming the option(s) as typed on
 * the command line ("--max-distance 500 exceeds ...") and the limit on error.
 * Idempotent. */
lb_status lb_task_options_resolve(lb_task_options *opt);

/* Vocabulary size (0 for real-valued inputs), number of classes (0 for
 * regression) and input features (0 for token inputs, else F) of resolved options. */
int64_t lb_task_vocab_size(const lb_task_options *opt);
int64_t lb_task_num_classes(const lb_task_options *opt);
int64_t lb_task_num_features(const lb_task_options *opt);

/* Whether option `key` (underscore spelling) applies to `task` (1/0; 0 if unknown). */
int lb_task_option_applies(lb_task_kind task, const char *key);

/* Writes every option of resolved `opt` that applies to its task as
 * "name=value" separated by `sep`. */
void lb_task_print_options(const lb_task_options *opt, const char *sep, FILE *out);
/* The same for the options a data file records: option table row i (lb_option_table)
 * is printed with its value when bit i of `recorded` is set, as "name=not recorded"
 * otherwise (a file written without that attribute: the value in `opt` is a default, not
 * the file's). */
void lb_task_print_recorded_options(const lb_task_options *opt, uint64_t recorded, const char *sep, FILE *out);

/* Prints the tasks and, for every option, its command-line spelling, range, the
 * tasks it applies to and each task's default. */
void lb_task_print_help(FILE *out);

/* Bytes of data the splits of resolved `opt` hold uncompressed: the sum over the
 * splits of N * (T * max(F, 1) + targets per example (1 or T) + 1 for distance +
 * 1 for lengths, when present) * 4. It is what lb_dataset_open allocates to read the
 * file, and close to the most it can take on disk (deflate shrinks token data several
 * times; random real-valued features much less).
 * INT64_MAX if it does not fit (options not resolved). */
int64_t lb_task_raw_bytes(const lb_task_options *opt);

/* The guard before generating into `output`: data over 16 GiB before compression
 * (lb_task_raw_bytes: also the memory needed to read the file back) is refused unless
 * allow_large, with LB_ERR_VALUE naming the sizes and the options that lower them
 * (--train/--val/--test, --seq-len, --allow-large); unless quiet, a note on stderr when
 * output's folder has less free space than that. */
lb_status lb_task_check_size(const lb_task_options *opt, const char *output, int allow_large, int quiet);

/* The temporary file lb_task_generate writes before renaming it over `path`:
 * "<path>.tmp" into buf. 0 on success, -1 if it does not fit in `size` bytes. A
 * program that is interrupted by a signal can unlink it from its handler
 * (lb_output_cleanup_arm, data/output.h). */
int lb_task_temp_path(const char *path, char *buf, size_t size);

/* Progress callback: `done` of `total` sequences written so far. */
typedef void (*lb_progress_fn)(int64_t done, int64_t total, void *user);

/* Generates the three splits of `opt` (resolved first; opt itself is not changed)
 * and writes them to the HDF5 file `path` in the format of docs/data.md. Writes to
 * "<path>.tmp" and renames it over `path` only when complete: an error never leaves
 * a partial file nor touches an existing `path`. `progress` (may be NULL) is called
 * after every block of sequences. Messages start with `path`. Errors: LB_ERR_VALUE
 * (options), LB_ERR_IO (file cannot be created, written or renamed), LB_ERR_MEMORY. */
lb_status lb_task_generate(const lb_task_options *opt, const char *path, lb_progress_fn progress, void *user);

LB_API_END

#endif
