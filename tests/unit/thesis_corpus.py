"""The thesis's printed queries, shared by the parser tests and the operator tests.

Each query is copied verbatim as the thesis prints it, with the lines of the thesis's
text it was copied from (its plain-text edition, 1-based, inclusive).
"""

from __future__ import annotations

from juggler.language import ColumnType

N, S = ColumnType.NUMBER, ColumnType.STRING
CATALOG = {
    "B": {"pressure": N, "temp": N, "alert": S},
    "H": {"beatrate": N, "vib": N, "alert": S},
    "K": {"fluid": N},
    "T": {"fluct": N, "degree": N, "incr": N},
}
TEMPLATE_CATALOG = {name: {"col1": N, "col2": N} for name in ("S1", "S2", "S3")}
FIG_5_1_CATALOG = {name: {"col1": N, "col2": N} for name in ("A", "B")}


# name: (first line, last line, text as printed) -- the thesis text's lines.
THESIS: dict[str, tuple[int, int, str]] = {
    "fig3_1": (378, 386, """\
Select <v1c, v2.. vn list>
From S1, S2, S3
Window          S1.ts > S2.ts
                   and
                   S2.ts <= S3.ts
MaxWindow 6sec
Where S1.col1 < 0.5 * S3.col2
                   and
                   S2.col1 * 2 = 103c"""),
    "fig3_3_q1": (410, 416, """\
Select      H.alert
From        B, H, K, T
Window      T.ts > B.ts
MaxWindow   4sec
Where       H.beatrate = 52 and
            B.temp > H.vib and
            B.pressure > T.fluct"""),
    "fig3_3_q2": (419, 425, """\
Select      B.alert
From        B, T, H
Window      B.ts > T.ts and
            B.ts <= H.ts
MaxWindow   6sec
Where       T.fluct < 0.5 * B.pressure
            T.fluct * 2 = 103"""),
    "fig3_3_q3": (428, 433, """\
Select      H.alert
From        T, H
Window      T.ts > H.ts
MaxWindow   5sec
Where       T.fluct = 103 and
            T.incr = H.vib"""),
    "fig5_1_q1": (1455, 1460, """\
Select *
From A, B
Window A.ts > B.ts
MaxWindow 2sec
Where A.col1 >= B.col2 and
      A.col1 > 50"""),
    "fig5_1_q2": (1463, 1468, """\
Select *
From A, B
Window A.ts < B.ts
MaxWindow 2sec
Where A.col1 >= 2 * B.col2 and
      B.col1 < 40"""),
    "fig5_8": (1675, 1685, """\
Select *
From B,H,T
Window B.ts <= T.ts and H.ts <= T.ts
MaxWindow 20sec
Where B.pressure < 90 and
      H.beatrate > 115 and
      B.pressure <= H.vib and
      B.ts <= H.ts and
      T.fluct lt 200 and
      B.temp lt= T.degree and
      H.vib lt= T.fluct"""),
    "overlap25_q1": (1722, 1727, """\
Select *
From BH
Window B.ts > H.ts
Max Window 20 sec
Where  B.pressure < 90 and
       B.pressure > H.vib"""),
    "overlap25_q2": (1733, 1740, """\
Select *
From BH
Window B.ts <= H.ts
Max Window 20 sec
Where  B.pressure < 115 and
       H.beatrate > 115 and
       B.pressure <= H.vib * 2 and
       B.pressure < H.beatrate"""),
    "overlap25_q3": (1746, 1755, """\
Select *
From BH
Window B.ts <= H.ts
Max Window 20 sec
Where  B.pressure < 116 and
       H.beatrate >= 115 and
       H.vib > 80 and
       B.pressure <= H.vib * 3 and
       B.pressure > H.beatrate and
       B.temp > H.beatrate"""),
    "overlap25_q4": (1761, 1772, """\
Select *
From BH
Window B.ts gt H.ts
Max Window 20 sec
Where  B.pressure < 117 and
       H.beatrate < 115 and
       H.vib < 80 and
       B.temp > 90 and
       B.pressure <= H.vib * 4 and
       B.pressure = H.beatrate and
       B.temp >= H.beatrate and
       B.temp > H.vib"""),
    "overlap25_q5": (1778, 1789, """\
Select *
From BH
Window B.ts >= H.ts
Max Window 20 sec
Where  B.pressure < 118 and
       H.beatrate = 115 and
       H.vib = 100 and
       B.temp = 98 and
       B.pressure > H.vib and
       B.pressure >= H.beatrate and
       B.temp < H.beatrate and
       B.temp >= H.vib"""),
    "overlap50_q1": (1797, 1802, """\
Select *
From BH
Window B.ts >= H.ts
Max Window 20 sec
Where B.pressure < 110 and
      B.pressure <= H.vib"""),
    "overlap50_q2": (1808, 1815, """\
Select *
From BH
Window B.ts >= H.ts
Max Window 20 sec
Where B.pressure > 113 and
      H.beatrate > 110 and
      B.pressure >= H.vib and
      B.pressure > H.beatrate"""),
    "overlap50_q3": (1821, 1830, """\
Select *
From BH
Window B.ts >= H.ts
Max Window 20 sec
Where B.pressure > 115 and
      H.beatrate >= 110 and
      H.vib > 80 and
      B.pressure >= H.vib * 2 and
      B.pressure < H.beatrate and
      B.temp > H.beatrate"""),
    "overlap50_q4": (1836, 1847, """\
Select *
From BH
Window B.ts >= H.ts
Max Window 20 sec
Where B.pressure > 117 and
      H.beatrate < 110 and
      H.vib < 80 and
      B.temp > 90 and
      B.pressure >= H.vib * 3 and
      B.pressure = H.beatrate and
      B.temp >= H.beatrate and
      B.temp >= H.vib"""),
    "overlap50_q5": (1853, 1864, """\
Select *
From BH
Window B.ts >= H.ts
Max Window 20 sec
Where B.pressure > 120 and
      H.beatrate = 115 and
      H.vib = 100 and
      B.temp = 98 and
      B.pressure >= H.vib * 4 and
      B.pressure >= H.beatrate and
      B.temp < H.beatrate and
      B.temp <= H.vib"""),
    "overlap75_q1": (1872, 1877, """\
Select *
From BH
Window B.ts <= H.ts
Max Window 20 sec
Where B.pressure < 110 and
      B.pressure <= H.vib and"""),
    "overlap75_q2": (1883, 1890, """\
Select *
From BH
Window B.ts <= H.ts
Max Window 20 sec
Where B.pressure < 113 and
      H.beatrate > 115 and
      B.pressure <= H.vib and
      B.temp > H.beatrate"""),
    "overlap75_q3": (1896, 1905, """\
Select *
From BH
Window B.ts <= H.ts
Max Window 20 sec
Where B.pressure < 115 and
      H.beatrate > 117 and
      H.vib > 80 and
      B.pressure <= H.vib * 2 and
      B.temp > H.beatrate * 2 and
      B.pressure < H.beatrate"""),
    "overlap75_q4": (1911, 1922, """\
Select *
From BH
Window B.ts <= H.ts
Max Window 20 sec
Where B.pressure < 117 and
      H.beatrate > 120 and
      H.vib < 80 and
      B.temp > 90 and
      B.pressure <= H.vib * 3 and
      B.temp > H.beatrate * 3 and
      B.pressure = H.beatrate and
      B.temp >= H.vib"""),
    "overlap75_q5": (1928, 1939, """\
Select *
From BH
Window B.ts <= H.ts
Max Window 20 sec
Where B.pressure < 120 and
      H.beatrate > 125 and
      H.vib = 100 and
      B.temp = 98
      B.pressure <= H.vib * 4 and
      B.temp > H.beatrate * 4 and
      B.pressure >= H.beatrate and
      B.temp = H.vib"""),
}

BROKEN = {"fig3_1", "fig3_3_q2", "overlap75_q1", "overlap75_q5"}
OVERLAP = sorted(n for n in THESIS if n.startswith("overlap") and n not in BROKEN)

REPAIRS = {
    "fig3_3_q2": ("0.5 * B.pressure\n", "0.5 * B.pressure and\n"),
    "overlap75_q1": (" and\x00", "\x00"),
    "overlap75_q5": ("B.temp = 98\n", "B.temp = 98 and\n"),
}


def thesis_texts() -> dict[str, str]:
    """The query texts as the thesis prints them."""
    return {name: text for name, (_, _, text) in THESIS.items()}


def repaired(name: str, text: str) -> str:
    """A broken thesis query with its missing `and` inserted or trailing `and` removed."""
    old, new = REPAIRS[name]
    return (text + "\x00").replace(old, new).removesuffix("\x00")
