"""A pickle read with bounded cost: the labels files corpora ship (CSL-Daily's csl2020ct_v2.pkl).

`pickle.load` runs whatever a file asks for; an allow-list of constructors stops that, but not a few
bytes that ask for gigabytes or crash the interpreter: `numpy.ndarray((10**12,))` (28 bytes),
`bytearray(3 GiB)` (30 bytes), a memo index of 2**28 (8 bytes: the unpickler sizes its memo table to
the largest index, 4 GiB), 1 MB of `]` (a list object per byte: 72 MB), a tuple nested a million
deep used as a dict key (its hash recurses in C until the stack overflows), a tuple DAG whose hash
visits 2**100 nodes, or a numpy object array whose state holds fewer items than its shape (numpy
1.26 crashes). So a load is two steps, both charging one budget, `PER_BYTE` x the file's size +
`BASE` bytes, and refused the moment the budget is spent, before the memory is taken:

1. `_walk`: every opcode, before anything is built (no object is made, only counted): what each op
   makes is charged at what CPython allocates for it, the memo table at its largest index, and
   tuples may nest at most MAX_DEPTH deep and cost at most MAX_HASH_WORK node visits to hash (all
   hashing of keys and set elements together too). Ops no labels file uses (persistent ids,
   out-of-band buffers, the extension registry) are refused; data that ends before STOP is
   `truncated`, a byte that is no opcode `damaged`.
2. the C unpickler, whose find_class hands out only guards: each allowed constructor charges what it
   is about to allocate (an array's bytes, a list(...)'s elements) before it runs, and refuses
   arguments no pickler writes (str() of a list: its repr has no bound). numpy arrays are rebuilt
   through a checked __setstate__, dtypes from their state without numpy's own __setstate__.

What a load may cost is thus at most the budget plus the file's bytes; peak memory of loading crafted
files is measured in docs/performance.md (scripts/bench/hostile.py).
"""

from __future__ import annotations

import _compat_pickle
import io
import operator
import pickle
import pickletools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PER_BYTE = 8  # budget: bytes a load may build per byte of the file ...
BASE = 64 * 2**20  # ... plus this much
MAX_DEPTH = 1000  # tuples inside tuples (hashing one recurses in C, without a depth check)
MAX_HASH_WORK = 10**7  # tuple nodes all hashing of keys and set elements may visit
LIST_ITEM = 9  # bytes per list slot (8, and over-allocation)
DICT_ITEM = 48  # bytes per dict entry (entry, index, growth)
SET_ITEM = 48
STACK_ITEM = 8  # the unpickler's own stack and mark slots


class Refused(Exception):
    """The pickle is not read; the message says why (without the file: the caller names it)."""


class Forbidden(Refused):
    """It asks for something a labels file has no need of."""


class TooCostly(Refused):
    """Building it would pass the budget."""


class Damaged(Refused):
    """It is truncated or not a pickle."""


@dataclass
class Budget:
    """Bytes a load may still build, and tuple-hash visits it may still make."""

    limit: int
    used: int = 0
    hash_work: int = 0

    @classmethod
    def for_size(cls, size: int) -> Budget:
        return cls(PER_BYTE * size + BASE)

    def charge(self, n: int, what: str) -> None:
        self.used += n
        if self.used > self.limit:
            raise TooCostly(f"{what} would take what it builds past {self.limit / 2**20:.0f} MiB")

    def hashing(self, visits: int) -> None:
        self.hash_work += visits
        if self.hash_work > MAX_HASH_WORK:
            raise TooCostly(f"its dict keys and set items are tuples whose hashing visits more than "
                            f"{MAX_HASH_WORK} nodes (tuples shared many times over)")


# --- 1. the opcodes, counted -------------------------------------------------------------------
_OPS = {op.code.encode("latin-1")[0]: op for op in pickletools.opcodes}
_NEVER = {"PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER", "EXT1", "EXT2", "EXT4"}
_NO_NEED = ", which data has no need of (loading it could run code)"
_LEAF = (0, 0)  # (hash visits, tuple depth) of anything that is no tuple or frozenset
# bytes CPython allocates for what an op makes (strings and containers' items are added per item)
_MADE = {"EMPTY_LIST": 72, "LIST": 72, "EMPTY_DICT": 80, "DICT": 80, "EMPTY_SET": 232,
         "FROZENSET": 232, "TUPLE": 56, "TUPLE1": 64, "TUPLE2": 72, "TUPLE3": 80, "BINFLOAT": 24,
         "FLOAT": 24, "BININT": 28, "BININT1": 28, "BININT2": 28, "INT": 32}
_STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING",
            "SHORT_BINSTRING"}
_BYTES = {"BINBYTES": 33, "SHORT_BINBYTES": 33, "BINBYTES8": 33, "BYTEARRAY8": 57, "LONG": 28,
          "LONG1": 28, "LONG4": 28}
_BEFORE = {op.name: [s.name for s in op.stack_before] for op in pickletools.opcodes}
_LENGTH = {pickletools.TAKEN_FROM_ARGUMENT1: (1, False), pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
           pickletools.TAKEN_FROM_ARGUMENT4U: (4, False), pickletools.TAKEN_FROM_ARGUMENT8U: (8, False)}


class _Walk:
    """The unpickler's stack and memo, simulated with (hash visits, depth) per item."""

    def __init__(self, data: bytes, budget: Budget, allowed: Callable[[str, str], bool]) -> None:
        self.data, self.budget, self.allowed = data, budget, allowed
        self.stack: list[tuple[int, int]] = []
        self.marks: list[int] = []
        self.memo: list[tuple[int, int] | None] = []
        self.filled = 0
        # a str may be UCS-4 (4 bytes a character) only when the file holds a 4-byte UTF-8 lead
        self.char = 4 if re.search(rb"[\xf0-\xf4]", data) else 2

    def _arg(self, pos: int, op: pickletools.OpcodeInfo) -> tuple[int, bytes, int]:
        """(where the op's argument ends, its bytes for small arguments, its data length)."""
        data, arg = self.data, op.arg
        if arg is None:
            return pos, b"", 0
        if arg.n == pickletools.UP_TO_NEWLINE:
            end = data.find(b"\n", pos)
            if end < 0:
                raise Damaged(f"truncated: the data ends inside {op.name} at byte {pos}")
            if arg.name == "stringnl_noescape_pair":  # GLOBAL, INST: two lines
                end2 = data.find(b"\n", end + 1)
                if end2 < 0:
                    raise Damaged(f"truncated: the data ends inside {op.name} at byte {pos}")
                return end2 + 1, data[pos:end2], end - pos
            return end + 1, data[pos:end] if end - pos < 64 else b"", end - pos
        if arg.n in _LENGTH:
            width, signed = _LENGTH[arg.n]
            if pos + width > len(data):
                raise Damaged(f"truncated: the data ends inside {op.name} at byte {pos}")
            n = int.from_bytes(data[pos:pos + width], "little", signed=signed)
            end = pos + width + n
            if n < 0 or end > len(data):
                raise Damaged(f"truncated: {op.name} at byte {pos} says {n} bytes follow, the file "
                              f"holds {len(data) - pos - width}")
            return end, data[pos + width:end] if n <= 8 else b"", n
        if pos + arg.n > len(data):
            raise Damaged(f"truncated: the data ends inside {op.name} at byte {pos}")
        return pos + arg.n, data[pos:pos + arg.n], arg.n

    def run(self) -> None:
        """Walk to STOP: the ops most of a labels file is made of (strings, small numbers, memo)
        take the short way (`_shortcuts`), the rest `_op`."""
        data, size, pos, budget = self.data, len(self.data), 0, self.budget
        short = self._shortcuts()
        while True:
            if pos >= size:
                raise Damaged(f"truncated: the data ends at byte {size} without the pickle's end (STOP)")
            code = data[pos]
            step = short.get(code)
            if step is not None:
                pos = step(pos + 1)
                if pos > size:
                    raise Damaged(f"truncated: the data ends inside {_OPS[code].name}")
                if budget.used > budget.limit:
                    budget.charge(0, _OPS[code].name)
                continue
            op = _OPS.get(code)
            if op is None:
                raise Damaged(f"damaged: byte {pos} ({code:#04x}) is no pickle opcode")
            if op.name in _NEVER:
                raise Forbidden(f"it uses the opcode {op.name}, which data has no need of")
            pos, small, n = self._arg(pos + 1, op)
            if op.name == "STOP":
                return
            self._op(op, small, n)

    def _shortcuts(self) -> dict[int, Callable[[int], int]]:
        """opcode -> a step taking the position after the opcode, returning where the next starts
        (what it makes charged, as `_op` would)."""
        data, stack, memo, budget, char = self.data, self.stack, self.memo, self.budget, self.char

        def string(width: int, base: int, per: int) -> Callable[[int], int]:
            def step(pos: int) -> int:
                n = int.from_bytes(data[pos:pos + width], "little")
                budget.used += base + per * n
                stack.append(_LEAF)
                return pos + width + n
            return step

        def push(width: int, cost: int) -> Callable[[int], int]:
            def step(pos: int) -> int:
                budget.used += cost
                stack.append(_LEAF)
                return pos + width
            return step

        def put(width: int) -> Callable[[int], int]:
            def step(pos: int) -> int:
                idx = int.from_bytes(data[pos:pos + width], "little") if width else self.filled
                if idx == len(memo) and stack and not (self.marks and len(stack) == self.marks[-1]):
                    budget.used += 16
                    memo.append(stack[-1])
                    self.filled += 1
                else:
                    self._put("LONG_BINPUT" if width == 4 else "BINPUT", data[pos:pos + width],
                              memoize=not width)
                return pos + width
            return step

        def get(width: int) -> Callable[[int], int]:
            def step(pos: int) -> int:
                stack.append(self._get(data[pos:pos + width]))
                budget.used += STACK_ITEM
                return pos + width
            return step

        s = STACK_ITEM
        return {0x8C: string(1, 80 + s, char), ord("X"): string(4, 80 + s, char),
                ord("C"): string(1, 33 + s, 1), ord("B"): string(4, 33 + s, 1),
                ord("q"): put(1), ord("r"): put(4), 0x94: put(0), ord("h"): get(1), ord("j"): get(4),
                ord("N"): push(0, s), 0x88: push(0, s), 0x89: push(0, s), ord(")"): push(0, s),
                ord("K"): push(1, 28 + s), ord("M"): push(2, 28 + s), ord("J"): push(4, 28 + s),
                ord("G"): push(8, 24 + s), ord("]"): push(0, 72 + s), ord("}"): push(0, 80 + s)}

    def _op(self, op: pickletools.OpcodeInfo, small: bytes, n: int) -> None:
        name = op.name
        if name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
            self._put(name, small, memoize=name == "MEMOIZE")
            return
        self._charge(name, small, n)
        if name == "MARK":
            self.marks.append(len(self.stack))
        elif _BEFORE[name] and _BEFORE[name][-1] == "stackslice":
            self._marked(op)
        else:
            popped = [self._pop() for _ in _BEFORE[name]][::-1]
            self.stack += self._made(name, popped, small, len(op.stack_after))

    def _charge(self, name: str, small: bytes, n: int) -> None:
        """What the op makes, and the stack slot it takes."""
        if name in _STRINGS:
            self.budget.charge(80 + self.char * n, name)
        elif name in _BYTES:
            self.budget.charge(_BYTES[name] + n, name)
        elif name in ("GLOBAL", "INST"):
            module, _, attr = small.decode("utf-8", "replace").partition("\n")
            if not self.allowed(module, attr):
                raise Forbidden(f"it asks for {module}.{attr}{_NO_NEED}")
        self.budget.charge(_MADE.get(name, 0) + STACK_ITEM, name)

    def _made(self, name: str, popped: list[tuple[int, int]], small: bytes,
              pushed: int) -> list[tuple[int, int]]:
        """What an op without a MARK leaves on the stack."""
        if name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            return [self._tuple(popped)]
        if name in ("GET", "BINGET", "LONG_BINGET"):
            return [self._get(small, binary=name != "GET")]
        if name == "DUP":
            return [popped[0], popped[0]]
        if name == "APPEND":
            self.budget.charge(LIST_ITEM, name)
            return [popped[0]]
        if name == "SETITEM":
            self.budget.hashing(popped[1][0] + 1)
            self.budget.charge(DICT_ITEM, name)
            return [popped[0]]
        return [_LEAF] * pushed

    def _pop(self) -> tuple[int, int]:
        if not self.stack or (self.marks and len(self.stack) == self.marks[-1]):
            raise Damaged("damaged: an op takes more from the stack than is on it")
        return self.stack.pop()

    def _marked(self, op: pickletools.OpcodeInfo) -> None:
        """An op that takes everything above the last MARK (and the container below it)."""
        if not self.marks:
            raise Damaged(f"damaged: {op.name} without a MARK")
        mark = self.marks.pop()
        items, self.stack[mark:] = self.stack[mark:], []
        below = _BEFORE[op.name].index("mark")
        containers = [self._pop() for _ in range(below)]
        name, k = op.name, len(items)
        if name in ("TUPLE", "FROZENSET"):
            if name == "FROZENSET":
                self.budget.hashing(sum(v for v, _ in items) + k)
            self.budget.charge((8 if name == "TUPLE" else SET_ITEM) * k, name)
            self.stack.append(self._tuple(items))
        elif name in ("APPENDS", "LIST"):
            self.budget.charge(LIST_ITEM * k, name)
            self.stack.append(containers[0] if containers else _LEAF)
        elif name in ("SETITEMS", "DICT", "ADDITEMS"):
            keys = items[::2] if name != "ADDITEMS" else items
            self.budget.hashing(sum(v for v, _ in keys) + len(keys))
            self.budget.charge(DICT_ITEM * len(keys), name)
            self.stack.append(containers[0] if containers else _LEAF)
        elif name != "POP_MARK":  # INST, OBJ: a constructor, charged by its guard
            self.stack.append(_LEAF)

    def _tuple(self, items: list[tuple[int, int]]) -> tuple[int, int]:
        visits = 1 + sum(v for v, _ in items)
        depth = 1 + max((d for _, d in items), default=0)
        if depth > MAX_DEPTH:
            raise TooCostly(f"it nests tuples more than {MAX_DEPTH} deep (hashing one would "
                            "overflow the interpreter's stack)")
        if visits > MAX_HASH_WORK:
            self.budget.hashing(visits)
        return (visits, depth)

    def _put(self, name: str, small: bytes, memoize: bool = False) -> None:
        if not self.stack or (self.marks and len(self.stack) == self.marks[-1]):
            raise Damaged(f"damaged: {name} with nothing to keep")
        if memoize:
            idx = self.filled
        elif name == "PUT":
            idx = _decimal(small, name)
        else:
            idx = int.from_bytes(small, "little")
        if idx >= len(self.memo):  # the unpickler's memo table grows to twice the largest index
            self.budget.charge(16 * (idx + 1 - len(self.memo)), f"{name} {idx}")
            self.memo.extend([None] * (idx + 1 - len(self.memo)))
        self.filled += self.memo[idx] is None
        self.memo[idx] = self.stack[-1]

    def _get(self, small: bytes, binary: bool = True) -> tuple[int, int]:
        idx = int.from_bytes(small, "little") if binary else _decimal(small, "GET")
        found = self.memo[idx] if idx < len(self.memo) else None
        if found is None:
            raise Damaged(f"damaged: it reads memo entry {idx}, which was never written")
        return found


def _decimal(small: bytes, name: str) -> int:
    try:
        return int(small)
    except ValueError:
        raise Damaged(f"damaged: {name} with {small[:20]!r}, not a number") from None


# --- 2. the allowed constructors, guarded -------------------------------------------------------
class _Array(np.ndarray):
    """An ndarray whose unpickled state is checked first (numpy 1.26 crashes on an object array
    whose list is shorter than its shape) and charged (the data is copied)."""

    budget: Budget | None = None

    def __setstate__(self, state: object) -> None:
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise Damaged("damaged: an array's state is no 4- or 5-tuple")
        version, (shape, dtype, fortran, raw) = (state[0], state[1:]) if len(state) == 5 \
            else (1, state)
        dtype = _dtype(dtype)
        shape = _shape(shape)
        size = int(np.prod(shape, dtype=object)) if shape else 1
        nbytes = size * max(dtype.itemsize, 1)
        if self.budget is not None:
            self.budget.charge(nbytes, f"an array of shape {shape}")
        if dtype.hasobject:
            if not isinstance(raw, list) or len(raw) != size:
                raise Damaged(f"damaged: an object array of {size} items whose state holds "
                              f"{len(raw) if isinstance(raw, list) else type(raw).__name__}")
        elif not isinstance(raw, bytes) or len(raw) != nbytes:
            raise Damaged(f"damaged: an array of {nbytes} bytes whose state holds another size")
        super().__setstate__((version, shape, dtype, bool(fortran), raw))


# A plain dtype's type code ('f8', '<U2', 'O8', '?', 'M8[ns]'); numpy parses anything else with
# ast.literal_eval (comma strings, sub-array shapes).
_TYPECODE = re.compile(r"[<>|=]?[?a-zA-Z]{1,2}[0-9]{0,12}(\[[0-9]{0,6}[a-zA-Z]{1,3}\])?")


class _DtypeState:
    """numpy.dtype(...) as a pickle makes it: kept as its arguments and state, turned into a dtype
    where one is used (`_dtype`), never through numpy's own __setstate__."""

    def __init__(self, obj: object, align: object = False, copy: object = False) -> None:
        if isinstance(obj, bytes):
            obj = obj.decode("ascii", "replace")
        if not isinstance(obj, str) or len(obj) > 64:
            raise Forbidden(f"it asks for numpy.dtype of {type(obj).__name__}")
        self.obj, self.state = obj, None

    def __setstate__(self, state: object) -> None:
        self.state = state


def _dtype(value: object) -> np.dtype:
    """A plain dtype (no fields, no sub-array) from a type code or a pickled dtype's state."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    obj, state = (value.obj, value.state) if isinstance(value, _DtypeState) else (value, None)
    if isinstance(obj, np.dtype):
        obj = obj.str
    if not isinstance(obj, str) or not _TYPECODE.fullmatch(obj):
        raise Damaged(f"damaged: a dtype given as {str(obj)[:40]!r}, not a type code")
    try:
        dt = np.dtype(obj)
    except (TypeError, ValueError, SyntaxError) as e:
        raise Damaged(f"damaged: dtype {obj[:40]!r} ({e})") from None
    if dt.fields is not None or dt.subdtype is not None:
        raise Forbidden(f"it asks for the structured dtype {obj[:40]!r}")
    if isinstance(state, tuple) and len(state) >= 6:
        order, names, fields, sub, elsize = state[1], state[3], state[4], state[2], state[5]
        if names is not None or fields is not None or sub is not None:
            raise Forbidden("it asks for a structured dtype")
        if isinstance(elsize, int) and elsize > 0 and dt.kind in "SUV" and dt.itemsize != elsize:
            dt = np.dtype(f"{dt.kind}{elsize // 4 if dt.kind == 'U' else elsize}")
        if order in ("<", ">") and dt.byteorder != "|":
            dt = dt.newbyteorder(order)
    return dt


def _shape(shape: object) -> tuple[int, ...]:
    try:
        dims = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else \
            tuple(operator.index(d) for d in shape)
    except TypeError:
        raise Damaged("damaged: an array shape that is no tuple of integers") from None
    if any(d < 0 for d in dims) or len(dims) > 32:
        raise Damaged(f"damaged: array shape {dims[:8]}")
    return dims


def _nbytes(shape: object, dtype: object) -> tuple[tuple[int, ...], np.dtype, int]:
    dims, dt = _shape(shape), _dtype(dtype)
    size = 1
    for d in dims:
        size *= d
    return dims, dt, size * max(dt.itemsize, 1)


def _hash_visits(items: object, seen: dict[int, int]) -> int:
    """Tuple nodes hashing each of `items` visits (tuples shared many times over are counted as
    often as hashing meets them), memoised by identity so the count itself stays cheap."""
    total = 0
    for x in items:  # type: ignore[attr-defined]
        total += _visits(x, seen)
    return total


def _visits(root: object, seen: dict[int, int]) -> int:
    if not isinstance(root, tuple):
        return 1
    stack: list[tuple[tuple, bool]] = [(root, False)]
    while stack:
        t, done = stack.pop()
        if id(t) in seen:
            continue
        if done:
            seen[id(t)] = 1 + sum(seen.get(id(c), 1) for c in t)
            continue
        stack.append((t, True))
        stack.extend((c, False) for c in t if isinstance(c, tuple) and id(c) not in seen)
    return seen[id(root)]


class _Guards:
    """The constructors a pickler calls through REDUCE for data (set, frozenset, bytes, bytearray,
    complex, slice; numpy's arrays, dtypes and scalars; _codecs.encode for bytes in protocol 2),
    each charging what it allocates before it runs. Tuples, lists, dicts, strings and numbers have
    opcodes of their own, so no pickler calls their constructors: they are not handed out. None of
    these returns a tuple, so the walk's count of what hashing a tuple visits stays exact."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.array = type("_Array", (_Array,), {"budget": budget})
        self.table: dict[tuple[str, str], Callable] = {
            ("builtins", "set"): self._set(set),
            ("builtins", "frozenset"): self._set(frozenset),
            ("builtins", "bytes"): self._bytes(bytes),
            ("builtins", "bytearray"): self._bytes(bytearray),
            ("builtins", "complex"): self._complex,
            ("builtins", "slice"): self._slice,
            ("numpy", "ndarray"): self._ndarray,
            ("numpy", "dtype"): _DtypeState,
            ("_codecs", "encode"): self._encode,
        }
        for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            self.table[(module, "_reconstruct")] = self._reconstruct
            self.table[(module, "scalar")] = self._scalar
        for module in ("numpy.core.numeric", "numpy._core.numeric"):  # protocol 5's arrays
            self.table[(module, "_frombuffer")] = self._frombuffer

    @staticmethod
    def _refuse(what: str, x: object) -> None:
        raise Forbidden(f"it asks for {what} of {type(x).__name__}, which no pickler writes")

    def _set(self, kind: type) -> Callable:
        def make(x: object = ()) -> object:
            if not isinstance(x, (list, tuple, set, frozenset)):
                self._refuse(f"builtins.{kind.__name__}", x)
            self.budget.charge(232 + SET_ITEM * len(x), f"builtins.{kind.__name__} of {len(x)} items")
            self.budget.hashing(_hash_visits(x, {}))
            return kind(x)
        return make

    def _bytes(self, kind: type) -> Callable:
        def make(x: object = b"", *rest: object) -> object:
            if isinstance(x, str) and len(rest) <= 2 and all(isinstance(r, str) for r in rest):
                n = 4 * len(x)
            elif isinstance(x, (bytes, bytearray)) and not rest:
                n = len(x)
            else:
                return self._refuse(f"builtins.{kind.__name__}", x)  # bytes(10**12) among them
            self.budget.charge(64 + n, f"builtins.{kind.__name__} of {n} bytes")
            return kind(x, *rest)
        return make

    def _complex(self, real: object = 0.0, imag: object = 0.0) -> complex:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and
                   (not isinstance(v, int) or v.bit_length() <= 64) for v in (real, imag)):
            self._refuse("builtins.complex", real)
        return complex(real, imag)  # type: ignore[arg-type]

    def _slice(self, *args: object) -> slice:
        if len(args) > 3 or not all(a is None or isinstance(a, int) and a.bit_length() <= 64
                                    for a in args):
            self._refuse("builtins.slice", args)
        return slice(*args)

    def _ndarray(self, shape: object = (0,), dtype: object = "f8", *rest: object) -> np.ndarray:
        if rest:
            raise Forbidden("it asks for numpy.ndarray over a buffer, which no pickler writes")
        dims, dt, nbytes = _nbytes(shape, dtype)
        self.budget.charge(nbytes, f"numpy.ndarray of shape {dims[:8]} ({nbytes} bytes)")
        return self.array(dims, dt)

    def _reconstruct(self, subtype: object, shape: object, dtype: object) -> np.ndarray:
        if subtype is not self.table[("numpy", "ndarray")]:
            raise Forbidden("it asks for numpy's _reconstruct of another type than ndarray")
        return self._ndarray(shape, dtype)

    def _frombuffer(self, buf: object, dtype: object, shape: object, order: object = "C"
                    ) -> np.ndarray:
        dims, dt, nbytes = _nbytes(shape, dtype)
        if not isinstance(buf, (bytes, bytearray)) or len(buf) != nbytes or order not in "CF":
            raise Damaged("damaged: an array whose buffer does not hold its shape")
        return np.frombuffer(buf, dt).reshape(dims, order=order)  # a view: nothing to charge

    def _scalar(self, dtype: object, obj: object = None) -> object:
        dt = _dtype(dtype)
        if dt.hasobject:  # numpy never writes one ("object scalars should never be created")
            raise Forbidden("it asks for a numpy object scalar, which no pickler writes")
        if not isinstance(obj, bytes) or len(obj) != dt.itemsize:
            raise Damaged("damaged: a numpy scalar without its bytes")
        self.budget.charge(64 + dt.itemsize, "numpy scalar")
        return np.frombuffer(obj, dt)[0]

    def _encode(self, obj: object, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        if not isinstance(obj, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8",
                                                        "ascii") or errors != "strict":
            self._refuse("_codecs.encode", obj)
        self.budget.charge(33 + 4 * len(obj), "_codecs.encode")
        return obj.encode(encoding)  # type: ignore[union-attr]


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, guards: _Guards) -> None:
        super().__init__(io.BytesIO(data))  # BytesIO: a declared length never reads past the end
        self.guards = guards

    def find_class(self, module: str, name: str) -> Callable:
        module, name = _modern(module, name)
        found = self.guards.table.get((module, name))
        if found is None:
            raise Forbidden(f"it asks for {module}.{name}{_NO_NEED}")
        return found


def _modern(module: str, name: str) -> tuple[str, str]:
    """Protocol 0-2 pickles name Python 2's modules (`__builtin__.set`)."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def allowed(module: str, name: str) -> bool:
    """Whether a pickle may ask for module.name at all (GLOBAL ops are checked before the load)."""
    module, name = _modern(module, name)
    return (module, name) in _Guards(Budget(0)).table


def load(data: bytes, budget: Budget | None = None) -> object:
    """The object a pickle holds, built within the budget (default: PER_BYTE x its size + BASE).
    Refused (Forbidden, TooCostly, Damaged) before the memory is taken; MemoryError and
    RecursionError still reach the caller."""
    budget = budget or Budget.for_size(len(data))
    _Walk(data, budget, allowed).run()
    try:
        return _Unpickler(data, _Guards(budget)).load()
    except Refused:
        raise
    except EOFError:
        raise Damaged("truncated: the data ends before the pickle's end") from None
    except pickle.UnpicklingError as e:
        raise Damaged(f"damaged: {e}") from None
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, OverflowError) as e:
        raise Damaged(f"damaged: {type(e).__name__}: {str(e)[:160]}") from None
