/* Output paths: what every writer of lookback (data files, checkpoints, metrics.csv,
 * config.json, reports, plots, evaluation outputs) checks before it creates a file.
 *
 * A writer only ever creates or replaces regular files. Whatever else is at the path
 * (a device such as /dev/null, a FIFO, a socket, a folder) is refused with a message
 * and left alone, also at the moment a finished temporary file is renamed into place.
 */
#ifndef LB_DATA_OUTPUT_H
#define LB_DATA_OUTPUT_H

#include "tensor/api.h"

#include "tensor/error.h"

LB_API_BEGIN

/* Checks that `path` may be written: not NULL or empty (LB_ERR_VALUE), and either
 * absent or a regular file; otherwise LB_ERR_IO "PATH: is a device / FIFO / socket /
 * folder, not a regular file; lookback writes only regular files". A symbolic link at
 * PATH, dangling or not, is refused with LB_ERR_IO "PATH: is a symbolic link (to
 * TARGET); lookback does not write through a link" (links in the folders above PATH are
 * followed as usual). The same for its temporary sibling
 * PATH.tmp, which writers create first. `what` names the file in messages
 * ("checkpoint", "data file", ...). */
lb_status lb_output_check(const char *path, const char *what);

/* Renames the finished temporary file `tmp` onto `path` after checking `path` again
 * (lb_output_check); on any failure removes `tmp` and returns LB_ERR_IO naming both
 * (or the check's error). */
lb_status lb_output_commit(const char *tmp, const char *path, const char *what);
/* The same, but never replaces anything: when a file appeared at `path` while the
 * writer worked (it was absent when the writer began), the rename fails and LB_ERR_IO
 * says "PATH: a file appeared there while the WHAT was being written; lookback leaves
 * it alone ..."; `tmp` is removed. renameat2(RENAME_NOREPLACE), or link + unlink on a
 * file system without it: atomic, there is no moment at which a check could be beaten. */
lb_status lb_output_commit_new(const char *tmp, const char *path, const char *what);
/* lb_output_commit when `replace` (something was at `path` when the writer began, and
 * the user asked to replace it), else lb_output_commit_new. Writers take `replace` from
 * lb_output_present(path) before they start, so that only what the user saw is replaced. */
lb_status lb_output_finish(const char *tmp, const char *path, const char *what, int replace);
/* 1 when anything (a file, a link, ...) is at `path`, 0 otherwise (and for NULL, with an
 * LB_ERR_VALUE error). */
int lb_output_present(const char *path);

/* Registers `path` as an input of this process (`what` names it in messages, e.g.
 * "the --data file"): from now on lb_output_check and lb_output_commit refuse, with
 * LB_ERR_IO "PATH is WHAT, an input of this command; lookback never writes over its
 * inputs", any output that is the same file (same device and inode, whatever the
 * spelling of the path: "./", "..", symbolic or hard links), --force or not. A path
 * that does not exist is not registered. Up to 64 inputs; LB_ERR_VALUE on NULL. */
lb_status lb_output_protect(const char *path, const char *what);
/* 1 when the file at `path` is a registered input (lb_output_protect), 0 otherwise: a
 * writer that cleans up after a failure leaves it alone. 0 with an LB_ERR_VALUE error
 * when path is NULL. */
int lb_output_is_input(const char *path);
/* Forgets every registered input (a library user that runs several jobs in one process). */
void lb_output_protect_clear(void);

/* Takes the writer's lock of `path` (an flock on PATH.lock, created beside it) so that
 * two processes never write the same file at once: LB_ERR_IO "another lookback process
 * is writing PATH" when it is held, or naming the folder when the lock file cannot be
 * created (a folder that does not exist is said so). *fd receives the lock's descriptor
 * for lb_output_unlock, which removes PATH.lock and releases it. The lock is the
 * kernel's: a writer killed (even with SIGKILL) releases it at once. LB_ERR_VALUE when
 * an argument is NULL. */
lb_status lb_output_lock(const char *path, const char *what, int *fd);
void lb_output_unlock(const char *path, int fd);

/* Removing a writer's leftovers when the process is stopped: between lb_output_cleanup_arm
 * and lb_output_cleanup_disarm, SIGINT, SIGTERM and SIGHUP (those not ignored, e.g. under
 * nohup) unlink PATH.tmp and, once lb_output_cleanup_locked was called (the writer holds
 * PATH.lock), PATH.lock, then end the process by the same signal (the default action, so
 * a shell reports 130 for Ctrl-C, 143 for SIGTERM). The handler makes only
 * async-signal-safe calls. One writer at a time per process; when PATH.tmp or PATH.lock
 * does not fit in 4096 bytes no handler is installed (the writer still cleans up on
 * errors). _locked is async-signal-safe (it may be called from a progress callback). */
void lb_output_cleanup_arm(const char *path);
void lb_output_cleanup_locked(void);
void lb_output_cleanup_disarm(void);

LB_API_END

#endif
