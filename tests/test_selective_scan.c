/* The selective scan's kernels (kernels/selective_scan.h) against a plain float64 loop
 * of the recurrence: values and gradients over several recomputation chunks, a scan in
 * two pieces through h0 / h_last, ragged valid lengths, and the same bits at 1 and 2
 * threads. (The op's gradcheck and its composition of simpler ops are rows of
 * tests/test_ops_table.c.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/selective_scan.h"
#include "support.h"
#include "tensor/threads.h"

enum { B = 3, T = 37, D = 5, N = 4 };

typedef struct scan_data {
    double u[B * T * D], delta[B * T * D], A[D * N], Bm[B * T * N], Cm[B * T * N], dy[B * T * D];
} scan_data;

static double uniform(uint64_t *s, double low, double high)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return low + (high - low) * (double)(*s >> 11) / 9007199254740992.0;
}

static void fill(scan_data *x, uint64_t seed)
{
    for (int i = 0; i < B * T * D; i++) {
        x->u[i] = uniform(&seed, -1, 1);
        x->delta[i] = uniform(&seed, -3, 2);
        x->dy[i] = uniform(&seed, -1, 1);
    }
    x->delta[7] = 25; /* softplus's linear branch */
    for (int i = 0; i < D * N; i++)
        x->A[i] = -(1 + i % N) * uniform(&seed, 0.5, 1.5);
    for (int i = 0; i < B * T * N; i++) {
        x->Bm[i] = uniform(&seed, -1, 1);
        x->Cm[i] = uniform(&seed, -1, 1);
    }
}

static double softplus(double v) { return v > 20 ? v : log1p(exp(v)); }

/* y by the recurrence, one (b, d, n) at a time, and the loss Σ dy y's gradients by
 * reverse accumulation over the stored states. */
static void reference(const scan_data *x, double *y, double *du, double *ddelta, double *dA, double *dB, double *dC)
{
    static double h[T + 1][N];
    memset(y, 0, sizeof(double) * B * T * D);
    for (int b = 0; b < B; b++)
        for (int d = 0; d < D; d++) {
            memset(h, 0, sizeof h);
            for (int t = 0; t < T; t++) {
                int r = (b * T + t) * D + d;
                double dl = softplus(x->delta[r]);
                for (int n = 0; n < N; n++) {
                    h[t + 1][n] = exp(dl * x->A[d * N + n]) * h[t][n] + dl * x->Bm[(b * T + t) * N + n] * x->u[r];
                    y[r] += x->Cm[(b * T + t) * N + n] * h[t + 1][n];
                }
            }
            double carry[N] = {0};
            for (int t = T - 1; t >= 0; t--) {
                int r = (b * T + t) * D + d, q = (b * T + t) * N;
                double dl = softplus(x->delta[r]), ddl = 0, g = x->dy[r];
                for (int n = 0; n < N; n++) {
                    double a = x->A[d * N + n], e = exp(dl * a), dh = carry[n] + g * x->Cm[q + n];
                    dC[q + n] += g * h[t + 1][n];
                    ddl += dh * h[t][n] * e * a + dh * x->Bm[q + n] * x->u[r];
                    dA[d * N + n] += dh * h[t][n] * e * dl;
                    dB[q + n] += dh * dl * x->u[r];
                    du[r] += dh * dl * x->Bm[q + n];
                    carry[n] = dh * e;
                }
                ddelta[r] += ddl * (x->delta[r] > 20 ? 1 : 1 / (1 + exp(-x->delta[r])));
            }
        }
}

static int close_all(const double *a, const double *b, int n, double tol, const char *what)
{
    for (int i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= tol * (1 + fabs(b[i])))) {
            fprintf(stderr, "\n  %s[%d]: %.12g vs %.12g\n", what, i, a[i], b[i]);
            return 0;
        }
    return 1;
}

static void test_matches_the_recurrence(void)
{
    static scan_data x;
    static double y[B * T * D], ry[B * T * D], g[2][B * T * D * 2 + D * N + 2 * B * T * N];
    fill(&x, 11);
    double *rdu = g[0], *rdd = rdu + B * T * D, *rdA = rdd + B * T * D, *rdB = rdA + D * N, *rdC = rdB + B * T * N;
    double *du = g[1], *dd = du + B * T * D, *dA = dd + B * T * D, *dB = dA + D * N, *dC = dB + B * T * N;
    memset(g, 0, sizeof g);
    reference(&x, ry, rdu, rdd, rdA, rdB, rdC);
    CU_ASSERT_EQUAL(lb_k_selective_scan(LB_FLOAT64, B, T, D, N, x.u, x.delta, x.A, x.Bm, x.Cm, NULL, NULL, NULL, y),
                    LB_OK);
    CU_ASSERT_TRUE(close_all(y, ry, B * T * D, 1e-12, "y"));
    for (int i = 0; i < B * T * D; i++)
        du[i] = 0.5; /* the backward adds */
    CU_ASSERT_EQUAL(lb_k_selective_scan_backward(LB_FLOAT64, B, T, D, N, x.u, x.delta, x.A, x.Bm, x.Cm, x.dy, du, dd,
                                                 dA, dB, dC),
                    LB_OK);
    for (int i = 0; i < B * T * D; i++)
        du[i] -= 0.5;
    CU_ASSERT_TRUE(close_all(du, rdu, B * T * D, 1e-11, "du"));
    CU_ASSERT_TRUE(close_all(dd, rdd, B * T * D, 1e-11, "ddelta"));
    CU_ASSERT_TRUE(close_all(dA, rdA, D * N, 1e-11, "dA"));
    CU_ASSERT_TRUE(close_all(dB, rdB, B * T * N, 1e-11, "dB"));
    CU_ASSERT_TRUE(close_all(dC, rdC, B * T * N, 1e-11, "dC"));
    /* float32 on the same values */
    static float f[5][B * T * D], fy[B * T * D];
    for (int i = 0; i < B * T * D; i++)
        f[0][i] = (float)x.u[i], f[1][i] = (float)x.delta[i];
    for (int i = 0; i < D * N; i++)
        f[2][i] = (float)x.A[i];
    for (int i = 0; i < B * T * N; i++)
        f[3][i] = (float)x.Bm[i], f[4][i] = (float)x.Cm[i];
    CU_ASSERT_EQUAL(lb_k_selective_scan(LB_FLOAT32, B, T, D, N, f[0], f[1], f[2], f[3], f[4], NULL, NULL, NULL, fy),
                    LB_OK);
    double wide[B * T * D];
    for (int i = 0; i < B * T * D; i++)
        wide[i] = fy[i];
    CU_ASSERT_TRUE(close_all(wide, ry, B * T * D, 1e-4, "float32 y"));
}

/* The scan of T steps equals the scan of 15 steps then 22 more from its h_last; a ragged
 * valid count leaves each stream's state after its own last step. */
static void test_pieces_and_valid_lengths(void)
{
    static scan_data x;
    fill(&x, 5);
    static double y[B * T * D], y1[B * 15 * D], y2[B * 22 * D], h1[B * D * N], h2[B * D * N], hall[B * D * N];
    static double part[5][B * 22 * D];
    lb_k_selective_scan(LB_FLOAT64, B, T, D, N, x.u, x.delta, x.A, x.Bm, x.Cm, NULL, NULL, hall, y);
    /* the first 15 steps of each stream, then the rest */
    for (int piece = 0; piece < 2; piece++) {
        int t0 = piece ? 15 : 0, len = piece ? 22 : 15;
        for (int b = 0; b < B; b++) {
            memcpy(part[0] + b * len * D, x.u + (b * T + t0) * D, sizeof(double) * len * D);
            memcpy(part[1] + b * len * D, x.delta + (b * T + t0) * D, sizeof(double) * len * D);
            memcpy(part[2] + b * len * N, x.Bm + (b * T + t0) * N, sizeof(double) * len * N);
            memcpy(part[3] + b * len * N, x.Cm + (b * T + t0) * N, sizeof(double) * len * N);
        }
        CU_ASSERT_EQUAL(lb_k_selective_scan(LB_FLOAT64, B, len, D, N, part[0], part[1], x.A, part[2], part[3],
                                            piece ? h1 : NULL, NULL, piece ? h2 : h1, piece ? y2 : y1),
                        LB_OK);
    }
    double joined[B * T * D];
    for (int b = 0; b < B; b++) {
        memcpy(joined + b * T * D, y1 + b * 15 * D, sizeof(double) * 15 * D);
        memcpy(joined + (b * T + 15) * D, y2 + b * 22 * D, sizeof(double) * 22 * D);
    }
    CU_ASSERT_TRUE(close_all(joined, y, B * T * D, 1e-12, "y in two pieces"));
    CU_ASSERT_TRUE(close_all(h2, hall, B * D * N, 1e-12, "h_last in two pieces"));
    /* valid {15, 0, 37}: stream 0's state is h1's, stream 1 keeps h0, stream 2 the whole scan's */
    static double h0[B * D * N], hv[B * D * N], yv[B * T * D];
    for (int i = 0; i < B * D * N; i++)
        h0[i] = 0.25 * (i % 7) - 0.5;
    const int64_t valid[B] = {15, 0, T};
    lb_k_selective_scan(LB_FLOAT64, B, T, D, N, x.u, x.delta, x.A, x.Bm, x.Cm, NULL, valid, hv, yv);
    CU_ASSERT_TRUE(close_all(hv, h1, D * N, 1e-12, "state after 15 of stream 0"));
    CU_ASSERT_TRUE(close_all(hv + 2 * D * N, hall + 2 * D * N, D * N, 1e-12, "state of stream 2"));
    lb_k_selective_scan(LB_FLOAT64, B, T, D, N, x.u, x.delta, x.A, x.Bm, x.Cm, h0, valid, hv, yv);
    CU_ASSERT_TRUE(close_all(hv + D * N, h0 + D * N, D * N, 0, "stream 1 with no valid step"));
}

/* float32 forward and backward give the same bits with 1 and 2 threads. */
static void test_same_bits_at_1_and_2_threads(void)
{
    static scan_data x;
    fill(&x, 3);
    static float f[6][B * T * D], out[2][6][B * T * D];
    for (int i = 0; i < B * T * D; i++)
        f[0][i] = (float)x.u[i], f[1][i] = (float)x.delta[i], f[5][i] = (float)x.dy[i];
    for (int i = 0; i < D * N; i++)
        f[2][i] = (float)x.A[i];
    for (int i = 0; i < B * T * N; i++)
        f[3][i] = (float)x.Bm[i], f[4][i] = (float)x.Cm[i];
    memset(out, 0, sizeof out);
    for (int k = 0; k < 2; k++) {
        lb_set_num_threads(k + 1);
        lb_k_selective_scan(LB_FLOAT32, B, T, D, N, f[0], f[1], f[2], f[3], f[4], NULL, NULL, NULL, out[k][0]);
        lb_k_selective_scan_backward(LB_FLOAT32, B, T, D, N, f[0], f[1], f[2], f[3], f[4], f[5], out[k][1],
                                     out[k][2], out[k][3], out[k][4], out[k][5]);
    }
    lb_set_num_threads(0);
    CU_ASSERT_EQUAL(memcmp(out[0], out[1], sizeof out[0]), 0);
    CU_ASSERT_NOT_EQUAL(out[0][3][0], 0); /* dA was written */
}

static void test_refuses_bad_arguments(void)
{
    double v[4] = {0};
    CU_ASSERT_EQUAL(lb_k_selective_scan((lb_dtype)7, 1, 1, 1, 1, v, v, v, v, v, NULL, NULL, NULL, v), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("selective scan"));
    CU_ASSERT_EQUAL(lb_k_selective_scan_backward(LB_FLOAT64, 1, -2, 1, 1, v, v, v, v, v, v, v, v, v, v, v),
                    LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("T -2"));
}

int main(void)
{
    static const lb_test_case cases[] = {
        {"scan and its backward equal the recurrence (float64, float32)", test_matches_the_recurrence},
        {"scan in pieces through h0 / h_last, ragged valid counts", test_pieces_and_valid_lengths},
        {"same bits at 1 and 2 threads", test_same_bits_at_1_and_2_threads},
        {"bad dtype or sizes are refused", test_refuses_bad_arguments},
        {NULL, NULL}};
    return lb_test_main("selective_scan", cases);
}
