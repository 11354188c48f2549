"""Hardware counters as one table: every metric of every profiled launch in a report, one row each
(launch, kernel, metric, value, unit, text), whichever reader read it (softbench.audit.readers).

Pure functions over pandas DataFrames and objects of the `ncu_report` API (the module NVIDIA ships with
Nsight Compute and on PyPI as ncu-report); nothing here imports ncu_report itself, so the same code serves the
package and an Nsight Compute install's own copy."""

from __future__ import annotations

import math

from softbench.audit.ncu import KernelMetrics

COLUMNS = ("launch", "kernel", "metric", "value", "unit", "text")


def _frame(rows):
    import pandas as pd  # heavy import, deferred

    return pd.DataFrame(rows, columns=list(COLUMNS))


def metric_value(metric) -> tuple[float | None, str | None]:
    """(number, text) of one IMetric: integers through as_uint64 and floating values through as_double (the
    accessors for each value kind), strings as text. Integers become floats in the table, exact below 2**53,
    far above any counter one kernel launch reaches."""
    kind, cls = metric.kind(), type(metric)
    if kind in (cls.ValueKind_UINT32, cls.ValueKind_UINT64):
        return float(metric.as_uint64()), None
    if kind in (cls.ValueKind_FLOAT, cls.ValueKind_DOUBLE):
        return float(metric.as_double()), None
    if kind == cls.ValueKind_STRING:
        return None, metric.as_string()
    return None, None


def frame_from_context(context):
    """Every metric of every action of a loaded report (ncu_report.load_report). Launches are numbered in
    report order, ranges first, actions within each: the ID column of `ncu --import --csv`."""
    rows, launch = [], 0
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            kernel = action.name()
            for name in action.metric_names():
                m = action.metric_by_name(name)
                value, text = metric_value(m)
                rows.append((launch, kernel, name, value, m.unit(), text))
            launch += 1
    return _frame(rows)


def frame_from_kernels(kernels: list[KernelMetrics]):
    """The CSV parser's launches as the same table; `text` is the cell as ncu printed it (its precision)."""
    rows = []
    for pos, k in enumerate(kernels):
        launch = int(k.identity.get("ID", pos) or pos)
        for name, (value, unit) in k.metrics.items():
            rows.append((launch, k.kernel_name, name, value, unit, k.printed.get(name)))
    return _frame(rows)


def _dims(metrics: dict, stem: str) -> str | None:
    """'(x, y, z)' from launch__<stem>_dim_x/y/z, as the CSV's Block Size and Grid Size columns print it."""
    parts = [metrics.get(f"launch__{stem}_dim_{c}", (None, ""))[0] for c in "xyz"]
    return None if None in parts else "(" + ", ".join(str(int(p)) for p in parts) + ")"


def kernels_from_frame(frame) -> list[KernelMetrics]:
    """The table as the launches softbench.audit.ncu picks from and reduces (pick_kernel, quantities)."""
    out = []
    for launch, rows in frame.groupby("launch", sort=True):
        metrics = {str(r.metric): (None if _missing(r.value) else float(r.value), str(r.unit or ""))
                   for r in rows.itertuples()}
        identity = {"ID": str(launch), "Kernel Name": str(rows["kernel"].iloc[0])}
        for key, stem in (("Block Size", "block"), ("Grid Size", "grid")):
            dims = _dims(metrics, stem)
            if dims:
                identity[key] = dims
        out.append(KernelMetrics(kernel_name=identity["Kernel Name"], identity=identity, metrics=metrics))
    return out


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _printed_tolerance(text) -> float:
    """Half a unit in the last digit ncu printed ('40.32' -> 0.005, '1,024' -> 0.5); 0 where nothing was
    printed, so values from two readers of the binary report must agree exactly."""
    if not isinstance(text, str) or not text.strip():
        return 0.0
    t = text.strip().strip('"').replace(",", "")
    decimals = len(t.split(".", 1)[1]) if "." in t else 0
    return 0.5 * 10.0 ** -decimals


def same_kernel(a: str, b: str) -> bool:
    """Two readers' names of one launch: equal, or one the function's name and the other its demangled signature
    (ncu_report names an action by its function, `device_kernel` for a CUTLASS kernel, where ncu's CSV prints
    `void cutlass::device_kernel<...>(...)`)."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    return bool(short) and (f"::{short}<" in long or f" {short}<" in long or f" {short}(" in long
                            or long.startswith(f"{short}<") or long.startswith(f"{short}("))


def compare(primary, other, metrics: tuple[str, ...] | list[str]) -> dict:
    """Does `other` hold the same values as `primary` for `metrics` in every launch `primary` has? Equal
    means: same kernel name and unit, and the same number, to the precision ncu printed where either side is
    its CSV (`text`), exactly otherwise. The differences list names each one that is not."""
    want = set(metrics)
    a = primary[primary["metric"].isin(want)].set_index(["launch", "metric"])
    b = other[other["metric"].isin(want)].set_index(["launch", "metric"])
    differences, compared = [], 0
    for key, row in a.iterrows():
        compared += 1
        if key not in b.index:
            differences.append({"launch": int(key[0]), "metric": key[1], "why": "missing"})
            continue
        o = b.loc[key]
        why = None
        if not same_kernel(str(row["kernel"]), str(o["kernel"])):
            why = "kernel name differs"
        elif str(o["unit"] or "") != str(row["unit"] or ""):
            why = f"unit {row['unit']!r} vs {o['unit']!r}"
        elif _missing(row["value"]) != _missing(o["value"]):
            why = "value present in one reader only"
        elif not _missing(row["value"]):
            tol = max(_printed_tolerance(row["text"]), _printed_tolerance(o["text"]))
            # the relative slack covers the last bit of a decimal printed from a binary double, nothing more
            if abs(float(row["value"]) - float(o["value"])) > tol + 1e-9 * abs(float(row["value"])):
                why = "value differs"
        if why:
            differences.append({"launch": int(key[0]), "metric": key[1], "why": why,
                                "value": None if _missing(row["value"]) else float(row["value"]),
                                "other": None if _missing(o["value"]) else float(o["value"]),
                                "other_text": None if _missing(o["text"]) else str(o["text"])})
    return {"equal": not differences and compared > 0, "compared": compared, "differences": differences[:20]}


def frame_from_nsight(df, primary):
    """nsight-python's DataFrame (ProfileResults.to_dataframe: one row per annotation, configuration and
    metric, with Kernel, Metric and AvgValue) as the table. It gives neither launch numbers nor units, so
    each row takes them from the primary reader's row of the same kernel and metric; a row with no such
    partner keeps launch -1 and shows up in compare() as missing from the primary's side."""
    keys = primary.drop_duplicates(["kernel", "metric"]).set_index(["kernel", "metric"])
    rows = []
    for kernel, metric, value in zip(df["Kernel"].astype(str), df["Metric"].astype(str), df["AvgValue"]):
        if (kernel, metric) in keys.index:
            partner = keys.loc[(kernel, metric)]
            launch, unit = int(partner["launch"]), partner["unit"]
        else:
            launch, unit = -1, ""
        rows.append((launch, kernel, metric, None if _missing(value) else float(value), unit, None))
    return _frame(rows)
