/* Build-time generator of the API walk test's call table.
 *
 * Reads the installed (public) headers named on the command line, takes every function
 * declared between LB_API_BEGIN and LB_API_END, and writes a C file with, for each
 * function, one caller `walk_call_N(int null_arg)` that builds every argument (a pointer
 * argument from the walk's table of valid values by type, or NULL when its index is
 * null_arg, or NULL for every pointer when null_arg is -2; a value argument from the
 * same table) and calls the function; then a table of the functions: name, return type,
 * pointer arguments. test_api_walk.c includes the file, so a function added to a public
 * header is walked without anyone listing it.
 *
 * Usage: api_walk_gen OUT.c HEADER...
 * Exit status 1 with a message on stderr when a declaration cannot be parsed. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PARAMS = 24, MAX_TEXT = 1 << 20 };

typedef struct param {
    char type[2048]; /* without the name, e.g. "const lb_tensor *" */
    char name[64];
    int is_pointer;  /* pointer, array or function pointer */
    int fn_split;    /* function pointer: where its name goes in type, else -1 */
} param;

static int failures = 0;

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "api_walk_gen: cannot open %s\n", path);
        return NULL;
    }
    char *buf = malloc(MAX_TEXT);
    size_t n = buf ? fread(buf, 1, MAX_TEXT - 1, f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = 0;
    return buf;
}

/* Removes comments and preprocessor lines (with their continuations), in place. */
static void strip(char *s) {
    char *w = s;
    int line_start = 1;
    for (char *r = s; *r;) {
        if (r[0] == '/' && r[1] == '*') {
            char *e = strstr(r + 2, "*/");
            r = e ? e + 2 : r + strlen(r);
            *w++ = ' ';
            continue;
        }
        if (r[0] == '/' && r[1] == '/') {
            while (*r && *r != '\n')
                r++;
            continue;
        }
        if (line_start) {
            char *p = r;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == '#') {
                while (*p && !(*p == '\n' && p[-1] != '\\'))
                    p++;
                r = p;
                continue;
            }
        }
        line_start = (*r == '\n');
        *w++ = *r++;
    }
    *w = 0;
}

/* Collapses whitespace runs to one space and trims. */
static void squeeze(char *s) {
    char *w = s;
    int space = 0;
    for (char *r = s; *r; r++) {
        if (isspace((unsigned char)*r)) {
            space = 1;
            continue;
        }
        if (space && w != s)
            *w++ = ' ';
        space = 0;
        *w++ = *r;
    }
    *w = 0;
}

/* Removes every `__attribute__((...))`. */
static void drop_attributes(char *s) {
    char *a;
    while ((a = strstr(s, "__attribute__"))) {
        char *p = strchr(a, '(');
        if (!p)
            return;
        int depth = 0;
        char *e = p;
        for (; *e; e++) {
            if (*e == '(')
                depth++;
            else if (*e == ')' && --depth == 0) {
                e++;
                break;
            }
        }
        memmove(a, e, strlen(e) + 1);
    }
}

static int is_ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

static int parse_param(const char *text, param *p, const char *fn) {
    char t[2048];
    snprintf(t, sizeof t, "%s", text);
    squeeze(t);
    const char *fp = strstr(t, "(*");
    if (fp) { /* function pointer: ret (*name)(args) */
        const char *n = fp + 2;
        while (*n == ' ')
            n++;
        size_t len = 0;
        while (is_ident(n[len]))
            len++;
        snprintf(p->name, sizeof p->name, "%.*s", (int)len, n);
        /* the type is the declaration with the name removed */
        snprintf(p->type, sizeof p->type, "%.*s%s", (int)(n - t), t, n + len);
        p->is_pointer = 1;
        p->fn_split = (int)(n - t);
        return 0;
    }
    int array = 0;
    char *br = strchr(t, '[');
    if (br) {
        array = 1;
        *br = 0;
        squeeze(t);
    }
    size_t end = strlen(t);
    size_t start = end;
    while (start > 0 && is_ident(t[start - 1]))
        start--;
    if (start == 0 || start == end) {
        fprintf(stderr, "api_walk_gen: %s: cannot parse parameter \"%s\"\n", fn, text);
        return -1;
    }
    snprintf(p->name, sizeof p->name, "%s", t + start);
    t[start] = 0;
    squeeze(t);
    snprintf(p->type, sizeof p->type, "%s%s", t, array ? " *" : "");
    p->is_pointer = strchr(p->type, '*') != NULL;
    p->fn_split = -1;
    return 0;
}

/* Writes the caller of one declaration (a statement without its ';'). */
static void emit_function(FILE *out, char *decl, int index, FILE *table) {
    drop_attributes(decl);
    squeeze(decl);
    if (!*decl || strncmp(decl, "typedef", 7) == 0 || strchr(decl, '{') || !strchr(decl, '('))
        return;
    char *open = strchr(decl, '(');
    char *name_end = open;
    while (name_end > decl && name_end[-1] == ' ')
        name_end--;
    char *name_start = name_end;
    while (name_start > decl && is_ident(name_start[-1]))
        name_start--;
    char name[128], ret[256];
    snprintf(name, sizeof name, "%.*s", (int)(name_end - name_start), name_start);
    snprintf(ret, sizeof ret, "%.*s", (int)(name_start - decl), decl);
    squeeze(ret);
    if (!*name || !*ret) {
        fprintf(stderr, "api_walk_gen: cannot parse \"%s\"\n", decl);
        failures++;
        return;
    }
    /* the parameter list, up to the matching ')' */
    int depth = 0;
    char *close = open;
    for (; *close; close++) {
        if (*close == '(')
            depth++;
        else if (*close == ')' && --depth == 0)
            break;
    }
    char args[2048];
    snprintf(args, sizeof args, "%.*s", (int)(close - open - 1), open + 1);
    squeeze(args);
    param params[MAX_PARAMS];
    int n = 0;
    if (strcmp(args, "void") != 0 && *args) {
        char *s = args;
        int d = 0;
        for (char *c = args;; c++) {
            if (*c == '(')
                d++;
            else if (*c == ')')
                d--;
            if ((*c == ',' && d == 0) || !*c) {
                char saved = *c;
                *c = 0;
                char probe[16];
                snprintf(probe, sizeof probe, "%s", s);
                squeeze(probe);
                if (!strcmp(probe, "...")) /* variadic: called with no extra arguments */
                    break;
                if (n == MAX_PARAMS || parse_param(s, &params[n], name) != 0) {
                    failures++;
                    return;
                }
                n++;
                if (!saved)
                    break;
                s = c + 1;
            }
        }
    }
    int is_void = strcmp(ret, "void") == 0;
    fprintf(out, "static void walk_call_%d(int null_arg) {\n", index);
    int n_ptr = 0;
    for (int i = 0; i < n; i++) {
        if (params[i].fn_split >= 0) { /* a function pointer: always NULL */
            fprintf(out, "    %.*sa%d%s = NULL;\n", params[i].fn_split, params[i].type, i,
                    params[i].type + params[i].fn_split);
            n_ptr++;
        } else if (params[i].is_pointer) {
            fprintf(out,
                    "    %s a%d = (null_arg == %d || null_arg == -2) ? NULL : (%s)walk_pointer(\"%s\", \"%s\");\n",
                    params[i].type, i, i, params[i].type, params[i].type, params[i].name);
            n_ptr++;
        } else {
            fprintf(out, "    %s a%d;\n    walk_value(&a%d, sizeof a%d, \"%s\", \"%s\");\n", params[i].type, i,
                    i, i, params[i].type, params[i].name);
        }
    }
    fprintf(out, "    lb_clear_error();\n    %s%s(", is_void ? "" : "(void)", name);
    for (int i = 0; i < n; i++)
        fprintf(out, "%sa%d", i ? ", " : "", i);
    fprintf(out, ");\n}\n");
    fprintf(table, "    {\"%s\", %d, walk_call_%d, %d, {", name, !is_void, index, n_ptr);
    int first = 1;
    for (int i = 0; i < n; i++) {
        if (!params[i].is_pointer)
            continue;
        fprintf(table, "%s{%d, \"%s\"}", first ? "" : ", ", i, params[i].name);
        first = 0;
    }
    fprintf(table, "}},\n");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: api_walk_gen OUT.c HEADER...\n");
        return 1;
    }
    char table_path[4096];
    snprintf(table_path, sizeof table_path, "%s.table", argv[1]);
    FILE *out = fopen(argv[1], "w");
    FILE *table = fopen(table_path, "w+");
    if (!out || !table) {
        fprintf(stderr, "api_walk_gen: cannot write %s\n", argv[1]);
        return 1;
    }
    fprintf(out, "/* Generated by tests/api_walk_gen.c from the public headers. Do not edit. */\n");
    int index = 0;
    for (int h = 2; h < argc; h++) {
        char *text = read_file(argv[h]);
        if (!text)
            return 1;
        strip(text);
        fprintf(out, "#include \"%s\"\n", argv[h]);
        char *p = text;
        char *begin;
        while ((begin = strstr(p, "LB_API_BEGIN"))) {
            char *end = strstr(begin, "LB_API_END");
            if (!end) {
                fprintf(stderr, "api_walk_gen: %s: LB_API_BEGIN without LB_API_END\n", argv[h]);
                return 1;
            }
            /* statements at brace depth 0, split at ';' */
            char *s = begin + strlen("LB_API_BEGIN");
            int depth = 0;
            for (char *c = s; c < end; c++) {
                if (*c == '{')
                    depth++;
                else if (*c == '}')
                    depth--;
                else if (*c == ';' && depth == 0) {
                    char stmt[4096];
                    snprintf(stmt, sizeof stmt, "%.*s", (int)(c - s), s);
                    emit_function(out, stmt, index, table);
                    index++;
                    s = c + 1;
                }
            }
            p = end + strlen("LB_API_END");
        }
        free(text);
    }
    fprintf(out, "static const walk_function walk_functions[] = {\n");
    rewind(table);
    int ch;
    while ((ch = fgetc(table)) != EOF)
        fputc(ch, out);
    fprintf(out, "    {NULL, 0, NULL, 0, {{0, NULL}}}\n};\n");
    fclose(table);
    remove(table_path);
    if (fclose(out) != 0) {
        fprintf(stderr, "api_walk_gen: cannot write %s\n", argv[1]);
        return 1;
    }
    return failures ? 1 : 0;
}
