#!/usr/bin/env python3
"""The HTML report in a real browser: headless Chromium renders the page of
`moeperm compare --html` for a case with differences planted in two outputs,
takes a screenshot, and the screenshot's pixels must show each map's blocks
coloured exactly where the differences were planted and the "no
difference" colour everywhere else.  The colours and the maps' sizes are
read from the page, the expected places from the planted pattern.

usage: html_browser.py MOEPERM
Exit 77 ("skipped") without numpy, or without chromium outside CI (in CI,
scripts/install-deps --test installs it, so its absence fails).  With
MOEPERM_HTML_SCREENSHOT=FILE the screenshot is kept there.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import html_pages as hp  # noqa: E402  (exits 77 without numpy)

np = hp.np

moeperm = sys.argv[1]
browser = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)),
               None)
if not browser:
    if os.environ.get("CI"):
        print("FAIL chromium is not installed (scripts/install-deps --test installs it)")
        sys.exit(1)
    print("chromium is not installed (apt-get install chromium): skipped")
    sys.exit(77)

checks = hp.Checks()
fail, check = checks.fail, checks.check


def read_png(path):
    """The pixels of an 8-bit RGB or RGBA PNG, as rows of (r, g, b)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s is not a PNG" % path)
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError("PNG of depth %d, colour type %d, interlace %d" % (depth, colour,
                                                                           interlace))
    bpp = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return rows


def rgb(hex_colour):
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def near(p, q):
    return all(abs(a - b) <= 3 for a, b in zip(p, q))


tmp = tempfile.mkdtemp(prefix="html_browser.")
corpus = os.path.join(tmp, "corpus")
case = hp.make_case(moeperm, corpus, "permute", "permute", 64, 4, 40)
out = os.path.join(tmp, "outputs")
hp.write_outputs(case, out, hp.PLANTS["permute"])
page_path = os.path.join(tmp, "page.html")
hp.run(moeperm, "compare", case, out, "--html", page_path, expect=1)
page, _ = hp.parse(page_path)

shot = os.path.join(tmp, "shot.png")
command = [browser, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", "--hide-scrollbars", "--force-device-scale-factor=1",
           "--force-color-profile=srgb", "--user-data-dir=" + os.path.join(tmp, "profile"),
           "--screenshot=" + shot, "--window-size=1200,2000", "file://" + page_path]
p = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
if not os.path.exists(shot):
    print("FAIL chromium wrote no screenshot (exit %d): %s" % (p.returncode,
                                                                p.stderr.decode()[-2000:]))
    sys.exit(1)
if os.environ.get("MOEPERM_HTML_SCREENSHOT"):
    shutil.copy(shot, os.environ["MOEPERM_HTML_SCREENSHOT"])
pixels = read_png(shot)

# The colours, from the page: the maps' background and the legend.
background = rgb(next(page.root.all("rect", "bg")).attrs["fill"])
legend = {i.parent.text().strip(): rgb(re.search(r"#[0-9a-f]{6}", i.attrs["style"]).group(0))
          for i in page.root.first("div", "legend").all("i")}
levels = [c for label, c in legend.items() if label != "none"]
check(legend["none"] == background and background not in levels,
      "the legend's 'none' is the maps' background, unlike every level's colour")

with open(os.path.join(case, "case.json")) as f:
    shapes = {k: v["shape"] for k, v in json.load(f)["tensors"].items()}


def find_map(width, height, after):
    """The top-left corner of the first band of `height` screenshot lines
    below `after` that each hold a run of exactly `width` pixels of map
    colours (background or a level) starting at the same place."""
    def runs(line):
        found, x = [], 0
        while x < len(line):
            if line[x] == background or line[x] in levels:
                x0 = x
                while x < len(line) and (line[x] == background or line[x] in levels):
                    x += 1
                found.append((x0, x - x0))
            else:
                x += 1
        return found
    start, band = None, 0
    for y in range(after, len(pixels)):
        hits = [x0 for x0, n in runs(pixels[y]) if n == width]
        if hits and start is not None and hits[0] == start[0] and band < height:
            band += 1
        elif hits:
            start, band = (hits[0], y), 1
        else:
            start, band = None, 0
        if band == height:
            return start
    return None


svgs = {d.first("h3").children[0].strip(): d.first("svg") for d in page.root.all("div", "output")}
below = 0
for name in ("permuted_tokens", "sorted_indices"):
    bg = next(svgs[name].all("rect", "bg"))
    width, height = int(bg.attrs["width"]), int(bg.attrs["height"])
    rows_n = shapes[name][0]
    cols_n = shapes[name][1] if len(shapes[name]) > 1 else 1
    line = len(shapes[name]) == 1
    # A tensor of one dimension is one line of slots here (256 < 512).
    grid_rows, grid_cols = (1, rows_n) if line else (rows_n, cols_n)
    mask = np.zeros((grid_rows, grid_cols), dtype=bool)
    for r0, r1, c0, c1, _ in hp.PLANTS["permute"][name]:
        if line:
            mask[0, r0:r1 + 1] = True
        else:
            mask[r0:r1 + 1, c0:c1 + 1] = True
    corner = find_map(width, height, below)
    if corner is None:
        fail("%s: no map of %dx%d pixels in the screenshot (kept at %s)" % (name, width, height,
                                                                           shot))
        continue
    x0, y0 = corner
    below = y0 + height
    sx, sy = width // grid_cols, height // grid_rows
    wrong, coloured = [], 0
    for py in range(height):
        for px in range(width):
            want = mask[py // sy, px // sx]
            got = pixels[y0 + py][x0 + px]
            if want:
                coloured += 1
            if (want and not near(got, legend["all"])) or (not want and not near(got,
                                                                               background)):
                wrong.append((px // sx, py // sy, got))
    check(not wrong and coloured == mask.sum() * sx * sy,
          "%s: %d blocks drawn in the 'all' colour exactly where the %d planted differences "
          "are, the background everywhere else" % (name, mask.sum(), mask.sum()),
          "%d wrong pixels, first %s (screenshot %s)" % (len(wrong), wrong[:3], shot))

if checks.failures == 0:
    shutil.rmtree(tmp)
checks.exit()
