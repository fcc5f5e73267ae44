#!/usr/bin/env bash
# The run report in a real browser (issue 11 item 3): renders `ptsim run --report` of a
# small plan with every timeline category in headless Chromium and checks that
#   - the page renders (the DOM Chromium built has the title, the four charts, the inputs);
#   - every colour a legend promises is drawn: the timeline and the stacked time bar are
#     rendered again without their legends, screenshotted, and each legend colour must
#     cover pixels of the PNG (decoded here with python3's zlib; no imaging library).
# Exit 77 (ctest SKIP_RETURN_CODE) when chromium or python3 is absent.
# Usage: report_browser.sh PTSIM_EXE SOURCE_DIR
set -euo pipefail
exe=$1
src=$2
command -v chromium >/dev/null 2>&1 || { echo "chromium not installed: skipped"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not installed: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$exe" run "$src/tests/cli/data/report_small.yaml" --report "$work/report.html" -q

# Chromium as root needs --no-sandbox; its own profile in the temporary folder keeps runs apart.
browse() {
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --user-data-dir="$work/profile" --no-first-run --disable-extensions "$@" 2>"$work/chromium.log"
}

browse --dump-dom "file://$work/report.html" >"$work/dom.html"
for want in '<h1>report-small</h1>' 'class="time-bars"' 'class="timeline"' '<table class="inputs">' \
            '>sequence length<' '>cost source<' '>F0<' '>B3<'; do
  grep -qF "$want" "$work/dom.html" || { echo "FAIL: rendered DOM lacks $want"; exit 1; }
done

python3 - "$work" <<'EOF'
import re, sys
work = sys.argv[1]
html = open(f"{work}/report.html", encoding="utf-8").read()
# The charts stacked without gaps; each one's pixels are counted in its own band of rows.
page = ['<!doctype html><html><head><meta charset="utf-8"><style>svg{display:block}</style></head>'
        '<body style="margin:0">']
promised, top = {}, 0
for cls in ("timeline", "time-bars"):
    m = re.search(r'<svg class="%s".*?</svg>' % cls, html, re.S)
    assert m, f"no {cls} chart"
    svg = m.group(0)
    legend = re.search(r'<g class="legend">.*?</g>', svg, re.S)
    assert legend, f"{cls}: no legend"
    names = re.findall(r'<text[^>]*>([^<]*)</text>', legend.group(0))
    colours = re.findall(r'fill="(#[0-9a-f]{6})"', legend.group(0))
    assert names and len(names) == len(colours), f"{cls}: legend names {names} colours {colours}"
    height = int(float(re.search(r'<svg[^>]* height="([0-9.]+)"', svg).group(1)))
    promised[cls] = (top, top + height, list(zip(names, colours)))
    top += height
    page.append(svg.replace(legend.group(0), ""))
page.append("</body></html>")
open(f"{work}/charts.html", "w", encoding="utf-8").write("\n".join(page))
with open(f"{work}/promised.txt", "w") as f:
    for cls, (y0, y1, items) in promised.items():
        for name, colour in items:
            f.write(f"{cls}\t{y0}\t{y1}\t{name}\t{colour}\n")
EOF

browse --window-size=1400,1400 --screenshot="$work/charts.png" "file://$work/charts.html" >/dev/null
browse --window-size=1300,2600 --screenshot="$work/report.png" "file://$work/report.html" >/dev/null

python3 - "$work" <<'EOF'
import struct, sys, zlib
from collections import Counter
work = sys.argv[1]

def pixels(path, rows=None):
    """RGB pixel counts of a non-interlaced 8-bit PNG (what Chromium writes), of the
    rows in range(*rows) when given."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    counts = Counter()
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if rows is None or rows[0] <= y < rows[1]:
            counts.update(bytes(line[i:i + 3]).hex() for i in range(0, stride, bpp))
        prev = line
    return counts

bands = {}
missing = []
for line in open(f"{work}/promised.txt"):
    cls, y0, y1, name, colour = line.rstrip("\n").split("\t")
    if cls not in bands:
        bands[cls] = pixels(f"{work}/charts.png", (int(y0), int(y1)))
    n = bands[cls].get(colour[1:], 0)
    print(f"{cls:10} {name:26} {colour}  {n:7d} px")
    if n < 4:
        missing.append(f"{cls} {name} {colour}")
full = pixels(f"{work}/report.png")
print(f"full page: {len(full)} distinct colours")
if len(full) < 20:
    sys.exit("FAIL: the report renders nearly blank")
if missing:
    sys.exit("FAIL: promised in a legend but not drawn: " + ", ".join(missing))
print("every promised colour is drawn")
EOF
