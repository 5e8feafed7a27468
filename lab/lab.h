/* The experiment engine, in one include: run folders and the run configuration
 * (lab/run.h, lab/run_config.h), comparisons (lab/compare.h), the method study and its
 * recipes (lab/study.h, lab/recipes.h), plots (lab/plot.h), progress display and files
 * (lab/progress.h, lab/files.h). Link lookback_lab (pkg-config lookback-lab, or the CMake
 * target lookback::lookback_lab), which brings json-c and PLplot. */
#ifndef LB_LAB_H
#define LB_LAB_H

#include "lookback.h"
#include "lab/files.h"
#include "lab/progress.h"
#include "lab/run_config.h"
#include "lab/run.h"
#include "lab/compare.h"
#include "lab/demo.h"
#include "lab/gradcheck.h"
#include "lab/recipes.h"
#include "lab/study.h"
#include "lab/plot.h"

#endif
