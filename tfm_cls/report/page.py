"""The report as one self-contained HTML page: inline CSS, a few lines of inline JavaScript
(sortable tables, the confusion matrix's counts / normalised switch) and inline SVG charts; no
external asset, no network. `render(content)` lays out what tfm_cls.report.collect computed.

Sections (each a <section id=...>, the browser test checks them): summary, per-class, confusion
(single-label) / thresholds (multi-label) / values (regression), calibration, errors, lengths,
label-errors, baseline.
"""

from __future__ import annotations

import html
import json
from typing import Any

from tfm_cls.classify.calibration import SHIFT_Z
from tfm_cls.classify.card import holds_text

SECTIONS = ("summary", "per-class", "outputs", "calibration", "errors", "lengths", "label-errors", "baseline",
            "candidates")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:20px 24px 60px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:17px;margin:0 0 10px}
.sub{color:#5b6475;margin-bottom:14px}
section{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:14px 18px;margin:14px 0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid #eceef2;text-align:right;vertical-align:top}
th:first-child,td:first-child,td.text,th.text{text-align:left}
th.sort{cursor:pointer;user-select:none}th.sort:after{content:" \\2195";color:#a0a7b4}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(230px,1fr));gap:6px 20px}
.kv b{display:inline-block;min-width:80px;color:#5b6475;font-weight:500}
.note{color:#5b6475;font-size:13px}.bad{color:#b42318}.good{color:#067647}
.cm td{text-align:center;min-width:38px}.cm th{font-weight:500}
.tok{border-radius:2px}.text{max-width:560px;white-space:pre-wrap;text-align:left}
.tag{display:inline-block;background:#eef1f6;border-radius:10px;padding:0 7px;font-size:12px;margin-left:4px}
button{font:inherit;border:1px solid #c5cbd6;background:#fff;border-radius:5px;padding:2px 9px;cursor:pointer}
button.on{background:#1d4ed8;color:#fff;border-color:#1d4ed8}
svg text{font:11px system-ui,sans-serif;fill:#3b4252}
"""

JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th.sort').forEach(function(th,col){
    th.addEventListener('click',function(){
      var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows),asc=th.dataset.dir!=='asc';
      th.dataset.dir=asc?'asc':'desc';
      rows.sort(function(a,b){
        var x=a.cells[col].dataset.v||a.cells[col].textContent,y=b.cells[col].dataset.v||b.cells[col].textContent;
        var nx=parseFloat(x),ny=parseFloat(y);
        var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c;});
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
});
document.querySelectorAll('[data-cm]').forEach(function(b){
  b.addEventListener('click',function(){
    var mode=b.dataset.cm;
    document.querySelectorAll('[data-cm]').forEach(function(o){o.classList.toggle('on',o===b);});
    document.querySelectorAll('.cm td[data-count]').forEach(function(td){
      td.textContent=mode==='counts'?td.dataset.count:td.dataset.norm;});
  });
});
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _e(value)


def _table(headers: list[str], rows: list[list[Any]], sortable: bool = True, text_cols: tuple[int, ...] = ()) -> str:
    head = "".join(f'<th class="{"sort" if sortable else ""}{" text" if i in text_cols else ""}">{_e(h)}</th>'
                   for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            if isinstance(cell, tuple):  # (shown html, sort value)
                cells.append(f'<td data-v="{_e(cell[1])}"{" class=text" if i in text_cols else ""}>{cell[0]}</td>')
            else:
                cells.append(f'<td{" class=text" if i in text_cols else ""}>{_num(cell) if not isinstance(cell, str) else _e(cell)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    cls = "sortable" if sortable else ""
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{_e(title)}</h2>{body}</section>'


# ---- charts (inline SVG) -----------------------------------------------------------------------------


def _reliability_svg(bins: dict[str, list[float]], title: str, colour: str) -> str:
    size, pad = 220, 30
    n = len(bins["count"])
    w = (size - pad) / n
    parts = [f'<svg width="{size + 10}" height="{size + 26}" role="img" aria-label="{_e(title)}">',
             f'<text x="{pad}" y="12">{_e(title)}</text>',
             f'<line x1="{pad}" y1="{size}" x2="{size}" y2="{pad - 10}" stroke="#bbb" stroke-dasharray="4 3"/>']
    total = max(sum(bins["count"]), 1)
    for b in range(n):
        if not bins["count"][b]:
            continue
        h = bins["accuracy"][b] * (size - pad + 10)
        x = pad + b * w
        parts.append(f'<rect x="{x:.1f}" y="{size - h:.1f}" width="{w - 1:.1f}" height="{h:.1f}" fill="{colour}" '
                     f'opacity="{0.35 + 0.65 * min(1.0, 8 * bins["count"][b] / total):.2f}">'
                     f'<title>confidence {bins["confidence"][b]:.3f}, accuracy {bins["accuracy"][b]:.3f}, '
                     f'{int(bins["count"][b])} rows</title></rect>')
        cy = size - bins["confidence"][b] * (size - pad + 10)
        parts.append(f'<line x1="{x:.1f}" x2="{x + w - 1:.1f}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="#111" stroke-width="1.5"/>')
    parts += [f'<line x1="{pad}" y1="{size}" x2="{size}" y2="{size}" stroke="#555"/>',
              f'<line x1="{pad}" y1="{size}" x2="{pad}" y2="{pad - 10}" stroke="#555"/>',
              f'<text x="{pad}" y="{size + 14}">0</text><text x="{size - 8}" y="{size + 14}">1</text>',
              f'<text x="{pad + 40}" y="{size + 24}">confidence (bars: accuracy)</text>', "</svg>"]
    return "".join(parts)


def _scatter_svg(true: list[float], predicted: list[float]) -> str:
    size, pad = 260, 34
    lo, hi = min(true + predicted), max(true + predicted)
    span = max(hi - lo, 1e-9)

    def px(v: float) -> float:
        return pad + (v - lo) / span * (size - pad - 6)

    def py(v: float) -> float:
        return size - (v - lo) / span * (size - pad - 6)

    dots = "".join(f'<circle cx="{px(t):.1f}" cy="{py(p):.1f}" r="2.5" fill="#1d4ed8" opacity="0.6"/>'
                   for t, p in zip(true, predicted))
    return (f'<svg width="{size + 10}" height="{size + 24}" role="img" aria-label="predicted vs true">'
            f'<line x1="{px(lo)}" y1="{py(lo)}" x2="{px(hi)}" y2="{py(hi)}" stroke="#bbb" stroke-dasharray="4 3"/>'
            f'{dots}<line x1="{pad}" y1="{size}" x2="{size}" y2="{size}" stroke="#555"/>'
            f'<line x1="{pad}" y1="{size}" x2="{pad}" y2="6" stroke="#555"/>'
            f'<text x="{pad}" y="{size + 14}">{lo:.2f}</text><text x="{size - 30}" y="{size + 14}">{hi:.2f}</text>'
            f'<text x="{pad + 60}" y="{size + 24}">true (x) vs predicted (y)</text></svg>')


def _histogram_svg(values: list[float], title: str, bins: int = 20) -> str:
    width, height, pad = 300, 160, 20
    lo, hi = min(values), max(values)
    span = max(hi - lo, 1e-9)
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / span * bins), bins - 1)] += 1
    top = max(counts) or 1
    w = (width - pad) / bins
    bars = "".join(f'<rect x="{pad + i * w:.1f}" y="{height - c / top * (height - 20):.1f}" width="{w - 1:.1f}" '
                   f'height="{c / top * (height - 20):.1f}" fill="#7c3aed"><title>{c}</title></rect>'
                   for i, c in enumerate(counts))
    return (f'<svg width="{width + 10}" height="{height + 26}" role="img" aria-label="{_e(title)}">{bars}'
            f'<line x1="{pad}" y1="{height}" x2="{width}" y2="{height}" stroke="#555"/>'
            f'<text x="{pad}" y="{height + 14}">{lo:.2f}</text><text x="{width - 30}" y="{height + 14}">{hi:.2f}</text>'
            f'<text x="{pad + 70}" y="{height + 24}">{_e(title)}</text></svg>')


# ---- sections ------------------------------------------------------------------------------------------


def _summary(c: dict[str, Any]) -> str:
    s = c["summary"]
    kv = [("task", s["task"]), ("data", s["data"]), ("model", s["model"]), ("size", s["size"]),
          ("speed", s["speed"] or "not measured"), ("training", s["train"]), ("report on", c["source"]),
          ("examples", c["examples"])]
    grid = '<div class="grid">' + "".join(f'<div class="kv"><b>{_e(k)}</b> {_e(v)}</div>' for k, v in kv) + "</div>"
    keys = list(c["metrics"])
    columns = [(f"this report ({c['split']})", c["metrics"])] + [(f"run: {k}", v) for k, v in s["splits"].items()]
    for name, baseline in s["baselines"].items():  # the run's own (train.baseline), beside the run's scores
        for split, values in baseline.items():
            columns.append((f"run: {name} ({split})", values))
    if c.get("baseline"):
        columns.append((f"TF-IDF baseline ({c['split']})", c["baseline"]["metrics"]))
    rows = [[k, *[v.get(k) for _, v in columns]] for k in keys]
    table = _table(["metric", *[n for n, _ in columns]], rows, sortable=False)
    temp = (f'<p class="note">Scores are calibrated: softmax(logits / {c["temperature"]:.4f}) (temperature fitted on '
            "validation after training).</p>" if c["temperature"] != 1.0 else "")
    return grid + "<p></p>" + table + temp


def _per_class(c: dict[str, Any]) -> str:
    rows = []
    threshold = c["kind"] == "label_sets"
    for name, v in c["per_class"].items():
        rows.append([name, v["precision"], v["recall"], v["f1"], v["support"], *([v["threshold"]] if threshold else [])])
    headers = ["label", "precision", "recall", "F1", "support", *(["threshold"] if threshold else [])]
    note = ('<p class="note">Per-label F1 at each label\'s threshold (tuned on validation); click a column to sort.</p>'
            if threshold else '<p class="note">Click a column to sort.</p>')
    return _table(headers, rows) + note


def _confusion(c: dict[str, Any]) -> str:
    labels, counts = c["labels"], c["confusion"]
    head = "<tr><th>true \\ predicted</th>" + "".join(f"<th>{_e(x)}</th>" for x in labels) + "</tr>"
    body = []
    for name, row in zip(labels, counts):
        total = max(sum(row), 1)
        cells = []
        for j, n in enumerate(row):
            share = n / total
            hue = "6,118,71" if labels[j] == name else "180,35,24"
            cells.append(f'<td data-count="{n}" data-norm="{share:.2f}" style="background:rgba({hue},{share * 0.85:.2f})">'
                         f"{share:.2f}</td>")
        body.append(f"<tr><th>{_e(name)}</th>{''.join(cells)}</tr>")
    switch = ('<p><button data-cm="norm" class="on">normalised (row = true class)</button> '
              '<button data-cm="counts">counts</button></p>')
    return switch + f'<table class="cm">{head}{"".join(body)}</table>'


def _outputs(c: dict[str, Any]) -> tuple[str, str]:
    if c["kind"] == "classes":
        return "Confusion matrix", _confusion(c)
    if c["kind"] == "label_sets":
        rows = sorted(c["per_class"].items(), key=lambda kv: kv[1]["f1"])
        bars = "".join(
            f'<div style="display:flex;align-items:center;gap:8px"><span style="width:140px">{_e(n)}</span>'
            f'<span style="background:#1d4ed8;height:10px;width:{v["f1"] * 300:.0f}px"></span>'
            f'<span>{v["f1"]:.3f} (threshold {v["threshold"]:.3f})</span></div>' for n, v in rows)
        return "Per-label F1 and thresholds", bars
    true, pred = c["values"]["true"], c["values"]["predicted"]
    residuals = [p - t for t, p in zip(true, pred)]
    return "Residuals and predicted vs true", (
        '<div style="display:flex;gap:24px;flex-wrap:wrap">' + _scatter_svg(true, pred)
        + _histogram_svg(residuals, "residual (predicted - true)") + "</div>")


def _calibration(c: dict[str, Any]) -> str:
    cal = c["calibration"]
    if cal is None:
        return '<p class="note">Not applicable: a regression model outputs values, not probabilities.</p>'
    if cal.get("per_label"):
        return (_reliability_svg(cal["before"], "every (text, label) probability", "#1d4ed8")
                + f'<p>ECE ({cal["bins"]} bins) of the per-label probabilities: <b>{cal["ece_before"]:.4f}</b>. '
                "Multi-label runs are not temperature-scaled: each label decides by its own threshold, tuned on "
                "validation, and a per-label temperature would only move that threshold.</p>")
    same = c["temperature"] == 1.0
    charts = _reliability_svg(cal["before"], "before: raw softmax", "#9ca3af")
    if not same:
        charts += _reliability_svg(cal["after"], f"after: T = {c['temperature']:.3f}", "#1d4ed8")
    text = (f'<p>ECE ({cal["bins"]} bins) on {_e(c["source"])}: before <b>{cal["ece_before"]:.4f}</b>'
            + (f', after temperature scaling <b>{cal["ece_after"]:.4f}</b>' if not same else
               " (this run has no temperature: trained with train.calibration=none or before calibration existed)")
            + ". Bars: accuracy of the texts whose top score falls in the bin (darker: more texts); black lines: "
            "their mean score; the dashed diagonal is perfect calibration.</p>")
    return f'<div style="display:flex;gap:24px;flex-wrap:wrap">{charts}</div>' + text + _calibration_verdict(c)


def _calibration_verdict(c: dict[str, Any]) -> str:
    """Whether the ECE shown is more than sampling noise, and whether the split the temperature
    was fitted on represents the texts evaluated."""
    cal, out = c["calibration"], ""
    noise = cal.get("noise")
    if noise:
        ece = cal["ece_after"] if c["temperature"] != 1.0 else cal["ece_before"]
        beyond = ece > noise["p90"]
        out += (f'<p id="calibration-noise">Perfectly calibrated scores would show an ECE of {noise["median"]:.4f} '
                f'(median; 90th percentile {noise["p90"]:.4f}) on these {c["examples"]} texts from sampling alone, '
                f'so {ece:.4f} is ' + ("<b>beyond that noise: the scores are miscalibrated here</b>." if beyond
                                       else "within that noise.") + "</p>")
    fitted = cal.get("fitted_on")
    if fitted and abs(fitted["shift"]) >= SHIFT_Z:
        accuracy = c["metrics"]["accuracy"]
        out += (f'<p class="bad" id="calibration-shift">The temperature was fitted on the run\'s validation split, '
                f'where accuracy was {fitted["accuracy"]:.4f} ({fitted["examples"]} texts); here it is {accuracy:.4f}: '
                f'{abs(fitted["shift"]):.1f} standard errors apart. Validation does not represent these texts, and a '
                "temperature fitted there may not carry to them.</p>")
    return out


def _highlight(tokens: list[dict[str, Any]]) -> str:
    scale = max([abs(t["score"]) for t in tokens if t["score"] is not None] or [1.0]) or 1.0
    out = []
    for t in tokens:
        if t["score"] is None:
            out.append(f'<span class="note">{_e(t["text"])}</span>' if t.get("cut") else _e(t["text"]))
            continue
        a = t["score"] / scale
        colour = f"rgba(22,163,74,{a * 0.8:.2f})" if a >= 0 else f"rgba(220,38,38,{-a * 0.8:.2f})"
        out.append(f'<span class="tok" style="background:{colour}" title="{t["score"]:+.4f}">{_e(t["text"])}</span>')
    return "".join(out)


def _examples(rows: list[dict[str, Any]], kind: str) -> str:
    if not rows:
        return '<p class="note">None in this split.</p>'
    header = ["#", "text (attributions)", "given", "predicted", *(["score"] if kind != "values" else [])]
    body = []
    for r in rows:
        cut = '<span class="tag">truncated</span>' if r["truncated"] else ""
        body.append([r["index"], (_highlight(r["tokens"]) + cut, r["index"]), r["given"], r["predicted"],
                     *([r["confidence"]] if kind != "values" else [])])
    return _table(header, body, text_cols=(1,))


def _errors(c: dict[str, Any]) -> str:
    e = c["errors"]
    kind = c["kind"]
    first = "Largest errors" if kind == "values" else "Highest-confidence mistakes"
    second = "Closest predictions" if kind == "values" else "Least confident correct answers"
    return (f'<p class="note">Token attributions: {_e(e["method"])}, towards the predicted label (green pushes '
            "towards it, red away).</p>"
            f"<h3>{first}</h3>{_examples(e['wrong'], kind)}<h3>{second}</h3>{_examples(e['unsure'], kind)}")


def _lengths(c: dict[str, Any]) -> str:
    lg = c["lengths"]
    what = "within 10 % of the value range" if c["kind"] == "values" else (
        "every label right" if c["kind"] == "label_sets" else "accuracy")
    rows = [[b["range"], b["examples"], b["accuracy"], b["truncated"], b["chunked"]] for b in lg["buckets"]]
    return (_table(["tokens", "examples", what, "truncated", "chunked"], rows, sortable=False)
            + f'<p class="note">Lengths in tokens before truncation ([CLS] and [SEP] included); the model reads '
            f'{lg["max_length"]} tokens{" per window (chunked inference)" if lg["chunk"] else ""}.</p>')


def _label_table(ranked: dict[str, Any]) -> str:
    rows = [[r["index"], r["text"], r["given"], r["suggested"], r["strength"]] for r in ranked["rows"]]
    return _table(["train #", "text", "given", "says", "strength"], rows, text_cols=(1,))


def _label_errors(c: dict[str, Any]) -> str:
    le = c["label_errors"]
    if le is None:
        return '<p class="note">The training split is not available (the run\'s data cannot be loaded).</p>'
    sample = f" (a seeded sample of {le['of']})" if le["scored"] < le["of"] else ""
    out = (f'<p>{_e(le["method"])}. <b>The model</b>: {le["model"]["issues"]} of {le["scored"]} training examples'
           f"{sample} are flagged, from the model's own probabilities on its training texts (in-sample, not "
           "out-of-fold: a label the model memorised is not found).</p>" + _label_table(le["model"]))
    oof = le.get("out_of_fold")
    if oof:
        out += (f'<h3>From the TF-IDF baseline, out-of-fold</h3><p>The same method on the probabilities of the '
                f'baseline below, each text scored by the one of {oof["folds"]} fold models that did not train on it '
                f'({oof["seconds"]:.1f} s): {oof["issues"]} flagged. Out-of-fold probabilities do not hide memorised '
                "labels (docs/report.md measures both rankings on injected flips).</p>" + _label_table(oof))
    return out


def _baseline(c: dict[str, Any]) -> str:
    b = c["baseline"]
    if b is None:
        return '<p class="note">No training split available: the baseline was not trained.</p>'
    rows = [[k, b["transformer"][k], b["metrics"][k]] for k in b["metrics"]]
    verdict = ""
    first = next(iter(b["metrics"]), None)
    if first is not None:
        gap = b["transformer"][first] - b["metrics"][first]
        lower_better = first == "mse"
        better = gap < 0 if lower_better else gap > 0
        verdict = (f'<p class="{"good" if better else "bad"}">{first}: the run\'s model is '
                   f'{"ahead of" if better else "not ahead of"} the baseline by {abs(gap):.4f}.</p>')
    return (f'<p>{_e(b["model"])}, trained on the same {b["train_examples"]} training examples in '
            f'{b["seconds"]:.1f} s.</p>' + _table(["metric", "the run's model", "TF-IDF baseline"], rows, sortable=False)
            + verdict)


def _front_svg(front: list[dict[str, Any]], metric: str) -> str:
    """Each candidate at (texts/s on one thread, log scale; validation score): the shipped one filled."""
    import math

    width, height, pad = 560, 220, 44
    xs = [math.log10(max(r["texts_per_second"], 1e-3)) for r in front]
    ys = [next(iter(r["validation"].values())) for r in front]
    x_lo, x_hi = min(xs) - 0.3, max(xs) + 0.3
    y_lo, y_hi = min(ys) - 0.02, max(ys) + 0.02

    def px(v: float) -> float:
        return pad + (v - x_lo) / (x_hi - x_lo) * (width - pad - 90)

    def py(v: float) -> float:
        return height - 20 - (v - y_lo) / (y_hi - y_lo) * (height - 40)

    dots = "".join(
        f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="6" fill="{"#16a34a" if r["chosen"] else "#fff"}" '
        f'stroke="#1d4ed8" stroke-width="2"><title>{_e(r["name"])}</title></circle>'
        f'<text x="{px(x) + 9:.1f}" y="{py(y) + 4 + 14 * (i % 2) * (1 if py(y) < height / 2 else -1):.1f}">'
        f'{_e(r["name"])}{" (shipped)" if r["chosen"] else ""}</text>'  # neighbours' names on alternate lines
        for i, (r, x, y) in enumerate(zip(front, xs, ys)))
    # the right-most dot's name runs past the axis: room for "bag_of_terms_3 (shipped)"
    return (f'<svg width="{width + 110}" height="{height + 20}" role="img" aria-label="candidates: score against speed">'
            f'<line x1="{pad}" y1="{height - 20}" x2="{width - 80}" y2="{height - 20}" stroke="#555"/>'
            f'<line x1="{pad}" y1="{height - 20}" x2="{pad}" y2="10" stroke="#555"/>{dots}'
            f'<text x="{pad}" y="{height - 4}">{10 ** x_lo:.0f}</text>'
            f'<text x="{width - 110}" y="{height - 4}">{10 ** x_hi:.0f} texts/s</text>'
            f'<text x="2" y="{py(y_hi) + 4:.1f}">{y_hi:.3f}</text><text x="2" y="{py(y_lo):.1f}">{y_lo:.3f}</text>'
            f'<text x="{pad}" y="{height + 14}">validation {_e(metric)} (y) against texts/s on one thread (x, log)'
            '</text></svg>')


def _candidates(c: dict[str, Any]) -> str:
    chosen = c["summary"].get("candidates")
    if not chosen:
        return ('<p class="note">This run made one deployable model (no bag-of-words branch fitted as a model of its '
                "own, or no validation split to choose on): it ships that model.</p>")
    front = [r for r in chosen["front"] if r.get("texts_per_second")]
    metric = next(iter(chosen["front"][0]["validation"]))
    rows = [[r["name"] + (f" (the logits of {r['same_logits_as']})" if r.get("same_logits_as") else ""),
             next(iter(r["validation"].values())), (r.get("test") or {}).get(metric),
             r.get("texts_per_second"), r.get("size_mb"), r.get("tolerance"),
             holds_text(r), "shipped" if r["chosen"] else ""] for r in chosen["front"]]
    return (f'<p>Shipped: <b>{_e(chosen["chosen"])}</b>. Rule: {_e(chosen["rule"])}.</p>' + _front_svg(front, metric)
            + _table(["candidate", f"validation {metric}", f"test {metric}", "texts/s (1 thread)", "weights MB",
                      "tolerance", "holds the best", ""], rows, text_cols=(0, 6, 7)))


def render(c: dict[str, Any]) -> str:
    """The page's HTML text."""
    outputs_title, outputs_body = _outputs(c)
    body = "".join([
        _section("summary", "Summary", _summary(c)),
        _section("per-class", {"classes": "Per class", "label_sets": "Per label", "values": "Metrics"}[c["kind"]],
                 _per_class(c)
                 if c["kind"] != "values" else _table(["metric", "value"], [[k, v] for k, v in c["metrics"].items()],
                                                      sortable=False)),
        _section("outputs", outputs_title, outputs_body),
        _section("calibration", "Calibration", _calibration(c)),
        _section("errors", "Errors", _errors(c)),
        _section("lengths", "Accuracy by input length", _lengths(c)),
        _section("label-errors", "Likely label errors in the training data", _label_errors(c)),
        _section("baseline", "Classical baseline", _baseline(c)),
        _section("candidates", "What the run chose", _candidates(c)),
    ])
    title = f"{c['summary']['name']}: report"
    data = json.dumps({"sections": list(SECTIONS), "kind": c["kind"]})
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>"
            f"<h1>{_e(title)}</h1><div class=sub>{_e(c['summary']['task'])} · {_e(c['source'])} · "
            f"made in {c['seconds']:.1f} s by tfm-cls report</div>{body}</main>"
            f'<script type="application/json" id="report-data">{html.escape(data, quote=False)}</script>'
            f"<script>{JS}</script></body></html>")
