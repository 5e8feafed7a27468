/* docs/reading.md stays true: every function and type its path names is defined in the
 * file it names, and the path (those definitions, whole files where it says so) stays
 * within the budget the page states. Prints each stop's current line ranges. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#ifndef LB_SOURCE_DIR
#error "LB_SOURCE_DIR must name the source tree"
#endif

enum { MAX_LINES = 20000, MAX_LINE = 1024 };

typedef struct source_file {
    int n;
    char **lines;
} source_file;

static int load_file(const char *rel, source_file *f)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", LB_SOURCE_DIR, rel);
    FILE *in = fopen(path, "r");
    f->n = 0;
    f->lines = NULL;
    if (!in)
        return 0;
    f->lines = calloc(MAX_LINES, sizeof *f->lines);
    char buf[MAX_LINE];
    while (f->lines && f->n < MAX_LINES && fgets(buf, sizeof buf, in)) {
        f->lines[f->n] = strdup(buf);
        f->n++;
    }
    fclose(in);
    return f->lines != NULL;
}

static void free_file(source_file *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->lines[i]);
    free(f->lines);
}

static int is_word(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* The 1-based line range [first, last] of symbol `name`'s definition: a function
 * defined at column 0 ("... name(" on a line that does not end in ';') up to the next
 * "}" at column 0, or a struct ("typedef struct name {" / "struct name {") up to its
 * closing "}". 0 when it is not defined there. */
static int find_definition(const source_file *f, const char *name, int *first, int *last)
{
    size_t len = strlen(name);
    for (int i = 0; i < f->n; i++) {
        const char *l = f->lines[i];
        if (l[0] == ' ' || l[0] == '\t' || l[0] == '/' || l[0] == '*' || l[0] == '#' || l[0] == '\n')
            continue;
        const char *p = strstr(l, name);
        while (p && ((p > l && is_word(p[-1])) || is_word(p[len])))
            p = strstr(p + 1, name);
        if (!p)
            continue;
        int is_struct = strncmp(l, "typedef struct ", 15) == 0 || strncmp(l, "struct ", 7) == 0;
        int is_function = p[len] == '(' && !strchr(l, ';');
        if (is_struct && !strchr(l, '{'))
            continue;
        if (!is_struct && !is_function)
            continue;
        /* a prototype continued on the next line ends in ';' there */
        int j = i;
        while (is_function && j + 1 < f->n && !strchr(f->lines[j], '{') && !strchr(f->lines[j], ';'))
            j++;
        if (is_function && strchr(f->lines[j], ';') && !strchr(f->lines[j], '{'))
            continue;
        for (int k = j; k < f->n; k++)
            if (f->lines[k][0] == '}') {
                *first = i + 1;
                *last = k + 1;
                return 1;
            }
    }
    return 0;
}

static void test_reading_path(void)
{
    source_file page;
    CU_ASSERT_FATAL(load_file("docs/reading.md", &page));
    long budget = 0;
    for (int i = 0; i < page.n && !budget; i++) {
        const char *b = strstr(page.lines[i], "**Budget: ");
        if (b) {
            for (const char *p = b + 10; *p && (isdigit((unsigned char)*p) || *p == ','); p++)
                if (isdigit((unsigned char)*p))
                    budget = budget * 10 + (*p - '0');
        }
    }
    CU_ASSERT(budget > 0);
    long total = 0;
    int stops = 0, symbols = 0, missing = 0;
    for (int i = 0; i < page.n; i++) {
        const char *l = page.lines[i];
        int stop;
        char file[256];
        /* | 12 | `layers/transformer.c` | `a`, `b` | ... */
        if (sscanf(l, "| %d | `%255[^`]` |", &stop, file) != 2)
            continue;
        stops++;
        source_file src;
        int loaded = load_file(file, &src);
        CU_ASSERT(loaded);
        if (!loaded) {
            fprintf(stderr, "docs/reading.md stop %d: %s does not exist\n", stop, file);
            missing++;
            continue;
        }
        const char *read = strchr(strchr(l + 1, '|') + 1, '|') + 1; /* the third column */
        const char *end = strchr(read, '|');
        printf("  stop %2d %-28s", stop, file);
        if (strstr(read, "whole file") && strstr(read, "whole file") < end) {
            total += src.n;
            printf(" whole file (%d lines)", src.n);
        }
        for (const char *p = strchr(read, '`'); p && p < end; p = strchr(p, '`')) {
            const char *q = strchr(p + 1, '`');
            if (!q || q > end)
                break;
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(q - p - 1), p + 1);
            int first = 0, last = 0;
            symbols++;
            if (find_definition(&src, name, &first, &last)) {
                total += last - first + 1;
                printf(" %s %d-%d", name, first, last);
            } else {
                fprintf(stderr, "\ndocs/reading.md stop %d: %s is not defined in %s (renamed or moved? update the page)\n",
                        stop, name, file);
                missing++;
            }
            p = q + 1;
        }
        printf("\n");
        free_file(&src);
    }
    free_file(&page);
    printf("  reading path: %d stops, %d definitions, %ld lines (budget %ld)\n", stops, symbols, total, budget);
    CU_ASSERT(stops >= 10);
    CU_ASSERT(symbols >= 20);
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT(total <= budget);
    if (total > budget)
        fprintf(stderr, "the reading path of docs/reading.md is %ld lines, past its budget of %ld\n", total, budget);
}

int main(void)
{
    static const lb_test_case cases[] = {
        {"docs/reading.md names what exists, within its budget", test_reading_path},
        {NULL, NULL},
    };
    return lb_test_main("reading_path", cases);
}
