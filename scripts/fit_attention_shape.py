#!/usr/bin/env python3
"""Fits the flash-attention shapes of hw/gpus.yaml (attention_kernels, attention_shape).

Data: FlashAttention-3 (J. Shah et al., arXiv 2407.08608, 2024), Fig. 5 (forward) and
Fig. 6 (backward), H100 80GB SXM5, BF16, head dim 128, TFLOP/s at sequence lengths
512 ... 16k (the bar labels). Each row is fitted by rate * L / (L + L_half), least squares
on the relative error (L_half searched on integers, rate in closed form), and printed with
its worst point. The catalog takes: forward rate / 989.4 TFLOP/s (BF16 dense peak) and
forward L_half; backward = backward rate / forward rate, backward L_half; causal = causal
rate / unmasked rate, causal_seq_half = causal L_half - unmasked L_half.
Run: python3 scripts/fit_attention_shape.py
"""

LENGTHS = [512, 1024, 2048, 4096, 8192, 16384]
PEAK = 989.4  # H100 SXM5 dense BF16, TFLOP/s
ROWS = {
    ("fa3", "forward"): [467, 565, 625, 638, 646, 648],
    ("fa3", "causal"): [292, 423, 521, 579, 602, 616],
    ("fa3", "backward"): [316, 424, 501, 542, 559, 561],
    ("cudnn", "forward"): [497, 574, 617, 609, 600, 595],
    ("cudnn", "causal"): [315, 410, 484, 518, 529, 539],
    ("cudnn", "backward"): [305, 408, 465, 499, 518, 516],
    ("fa2", "forward"): [309, 350, 362, 368, 370, 370],
    ("fa2", "causal"): [191, 260, 298, 319, 333, 335],
    ("fa2", "backward"): [214, 260, 291, 310, 318, 322],
}


def fit(values):
    best = None
    for half in range(0, 3000):
        ratio = [(l / (l + half)) / v for l, v in zip(LENGTHS, values)]
        rate = sum(ratio) / sum(r * r for r in ratio)
        err = sum((rate * r - 1) ** 2 for r in ratio)
        if best is None or err < best[0]:
            best = (err, half, rate)
    _, half, rate = best
    worst = max(abs(rate * l / (l + half) / v - 1) for l, v in zip(LENGTHS, values))
    return rate, half, worst


def main():
    fits = {key: fit(values) for key, values in ROWS.items()}
    for (kernel, row), (rate, half, worst) in fits.items():
        print(f"{kernel:6s} {row:9s} rate {rate:6.1f} TFLOP/s = {rate / PEAK:.3f} of peak, "
              f"L_half {half:4d}, worst point {100 * worst:.1f} %")
    for kernel in ("fa3", "cudnn", "fa2"):
        fwd, bwd, causal = (fits[(kernel, r)] for r in ("forward", "backward", "causal"))
        print(f"{kernel}: forward {fwd[0] / PEAK:.3f} seq_half {fwd[1]}, backward {bwd[0] / fwd[0]:.3f} "
              f"backward_seq_half {bwd[1]}, causal {causal[0] / fwd[0]:.3f} causal_seq_half {causal[1] - fwd[1]}")


if __name__ == "__main__":
    main()
