/* soundness.c - `make soundness`: every derived float bound against a model
 * of a correct kernel on many seeded cases (tests/soundness.h), one table
 * row per op: cases, worst err/bound (must be <= 0.8), the largest share of
 * the codes at risk that flipped (MX outputs whose flip budget is counted
 * from the inputs; may reach 1), the sign test's largest |S| (must stay
 * <= 0.8 x its threshold), where, and in how many cases the
 * one-bf16-ulp bias is caught (must be > 0).  Exit 0 when
 * every row holds, 1 otherwise.
 *
 * usage: soundness [--scale F] [--filter SUBSTRING]
 *   --scale F   run F times each entry's case count (default 1) */
#include "soundness_models.h"

int main(int argc, char **argv)
{
    double scale = 1.0;
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--scale") && i + 1 < argc)
            scale = atof(argv[++i]);
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--scale F] [--filter SUBSTRING]\n", argv[0]);
            return 2;
        }
    }
    int bad = 0;
    printf("%-56s %6s %8s %11s %7s %12s  %s\n", "op (class of cases)", "cases", "worst", "risk flips", "sign|S|",
           "bias caught", "verdict");
    for (int k = 0; k < SND_ENTRIES; k++) {
        const snd_entry *en = &snd_entries[k];
        if (filter && !strstr(en->label, filter))
            continue;
        int n = (int)(en->cases * scale + 0.5);
        snd_result r = snd_run(en, n < 1 ? 1 : n);
        const int ok = snd_ok(&r);
        bad |= !ok;
        char risk[16] = "-";
        if (r.risk_use > 0)
            snprintf(risk, sizeof risk, "%.3f", r.risk_use);
        char sign[16] = "-";
        if (r.sign_worst > 0)
            snprintf(sign, sizeof sign, "%.2f", r.sign_worst);
        printf("%-56.56s %6d %8.3f %11s %7s %5d of %-5d  %s\n", en->label, r.cases, r.worst, risk, sign, r.bias_killed,
               r.cases, ok ? "ok" : "FAIL");
        printf("    model: %s\n    worst: %s\n", en->model_doc, r.worst_at);
        if (r.errors || r.failed)
            printf("    %d cases failed, %d errors%s%s\n", r.failed, r.errors, r.error[0] ? ": " : "", r.error);
        fflush(stdout);
    }
    printf("soundness: %s (margin: worst err/bound <= %.2f; the one-ulp bias caught)\n", bad ? "FAIL" : "ok",
           SND_MARGIN);
    return bad ? 1 : 0;
}
