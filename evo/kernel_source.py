"""Reading a CUDA source as engines write it: its ``__global__`` kernels (name with namespaces, template parameters,
parameter list) and its includes.

Called by `evo new --kernel` (which kernel, which knobs, which include folders), by `evo check` (the entry's
parameter list) and by `evo export` (the instantiation a step launches). One tokenizer pass over the file, then one
pass over its tokens: the work is linear in the file's length (a 2 MB header reads in well under a second), and no
pattern of declaration specifiers is assumed: ``template<...>``, ``static``/``inline``, ``__launch_bounds__(...)``,
``__global__`` and the return type (``void``, ``std::enable_if_t<...>``, ``typename std::enable_if<...>::type``) come
in any order. Comments, string literals and ``#if 0`` blocks are skipped; other preprocessor lines are kept as one
token each (a parameter list holding ``#ifdef`` is then seen as one a reader cannot count).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import NamedTuple

# one alternative per token kind; whitespace matches none (finditer steps over it), comments are dropped
_TOKEN = re.compile(
    r"(?P<pp>^[ \t]*\#(?:\\\r?\n|[^\n])*)"  # a preprocessor line, with its continuations
    r"|(?P<raw>R\"(?P<delim>[^()\\\s\"]{0,16})\(.*?\)(?P=delim)\")"
    r"|(?P<id>[A-Za-z_]\w*)"
    r"|(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))"
    r"|(?P<str>\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])+')"
    r"|(?P<num>\.?\d(?:[eEpP][+-]|'(?=\w)|[\w.])*)"
    r"|(?P<op>::|->|\.\.\.|&&|\|\||[^\s\w])",
    re.S | re.M,
)


class Token(NamedTuple):  # a tuple: a file's hundreds of thousands are made fast
    kind: str  # pp, str, id, num, op
    text: str
    start: int
    end: int


def tokenize(source: str) -> list[Token]:
    """The tokens of a source, comments dropped, ``#if 0`` / ``#if 1 ... #else`` branches that never compile
    dropped (with their directives); every other preprocessor line is one ``pp`` token.

    `evo new` asks for one file's tokens several times (its entries, its includes): the last few sources' tokens
    are kept, so a 2 MB kernel is tokenized once (seconds), not five times."""
    return list(_tokens(source))


@functools.lru_cache(maxsize=4)
def _tokens(source: str) -> tuple[Token, ...]:
    from evo import stop

    out: list[Token] = []
    conds: list[str] = []  # per open #if: "keep" (its directive tokens kept), "zero", "one" (dropped)
    dead = 0  # >0: inside a branch that never compiles; counts the #ifs opened inside it
    for i, m in enumerate(_TOKEN.finditer(source)):
        if not i & 0xFFFF:
            stop.check()  # a stop request (evo new of a huge file) is honoured within a fraction of a second
        kind = m.lastgroup
        if kind == "comment":
            continue
        if kind == "pp":
            directive = re.match(r"\s*#\s*(\w*)\s*(.*)", m.group(0), re.S)
            word, rest = (directive.group(1), directive.group(2).strip()) if directive else ("", "")
            if dead:
                if word.startswith("if"):
                    dead += 1
                elif word == "endif":
                    dead -= 1
                    if not dead:
                        conds.pop()
                elif dead == 1 and word in ("else", "elif") and conds[-1] == "zero":
                    dead = 0  # the branch after #if 0 compiles
                continue
            if word == "if" and rest in ("0", "false"):
                conds.append("zero")
                dead = 1
                continue
            if word == "if" and rest in ("1", "true"):
                conds.append("one")
                continue
            if word.startswith("if"):
                conds.append("keep")
            elif word in ("else", "elif") and conds and conds[-1] == "one":
                dead = 1  # the branch after #if 1 never compiles
                continue
            elif word in ("else", "elif") and conds and conds[-1] == "zero":
                continue  # #if 0's live branch: its #else line means nothing more
            elif word == "endif" and conds:
                if conds.pop() != "keep":
                    continue
        elif dead:
            continue
        out.append(Token("str" if kind == "raw" else str(kind), m.group(), m.start(), m.end()))
    return tuple(out)


def spelled(tokens: list[Token]) -> str:
    """Tokens as written, whitespace (and comments) between them one space."""
    parts = []
    for i, t in enumerate(tokens):
        if i and t.start > tokens[i - 1].end:
            parts.append(" ")
        parts.append(t.text)
    return " ".join("".join(parts).split())


@dataclass(frozen=True)
class Entry:
    """A kernel's entry point as read from its source."""

    name: str  # with its namespaces: "myengine::rms_norm" (an anonymous namespace adds nothing)
    template: tuple[tuple[str, str, str | None], ...]  # (type, name, default) of each template parameter
    params: str  # the parameter list as written
    extern_c: bool = False
    returns: str = "void"  # the return type as written ("std::enable_if_t<(width > 0)>", ...)
    reads_block_dim: bool = False  # its body reads blockDim: its block size is chosen at launch

    def expression(self) -> str:
        if not self.template:
            # a C++ function (mangled) is found through a name expression: qualified, "::name" at global scope
            return self.name if self.extern_c or "::" in self.name else f"::{self.name}"
        return f"{self.name}<" + ", ".join("{" + knob_name(n) + "}" for _, n, _ in self.knob_params()) + ">"

    def knob_params(self) -> tuple[tuple[str, str, str | None], ...]:
        """The template parameters that become knobs: those before the first unnamed one (``typename = void``),
        which keeps its default, as do those after it."""
        k = next((i for i, t in enumerate(self.template) if not t[1]), len(self.template))
        return self.template[:k]


def knob_name(param: str) -> str:
    """BLOCK_SIZE -> block_size, NumSplits -> num_splits."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", param)
    return s.lower()


# names followed by a parenthesised list that are no function's name
_NOT_A_NAME = frozenset(
    {
        "__launch_bounds__",
        "__attribute__",
        "__declspec",
        "__cluster_dims__",
        "__maxnreg__",
        "__grid_constant__",
        "alignas",
        "decltype",
        "noexcept",
        "throw",
        "sizeof",
        "static_assert",
        "operator",
    }
)
_OPEN = {"(": ")", "[": "]", "{": "}"}


def _close(toks: list[Token], i: int) -> int:
    """The index of the bracket closing the one at ``i`` (``(``, ``[`` or ``{``), or the last token's."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if t in _OPEN:
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
            if not depth:
                return j
    return len(toks) - 1


def _close_angle(toks: list[Token], i: int) -> tuple[int, bool]:
    """(the index of the ``>`` closing the ``<`` at ``i``, True), brackets skipped (a ``>`` in ``(width > 0)``
    closes nothing); (the index of the ``;`` or brace that came first, False): a less-than, not a template's list,
    and nothing before that token declares a kernel (the caller goes on from there: each token is read once)."""
    depth, j = 0, i
    while j < len(toks):
        t = toks[j].text
        if t in ("(", "["):
            j = _close(toks, j)
        elif t in (";", "{", "}"):
            return j, False
        elif t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
            if not depth:
                return j, True
        j += 1
    return len(toks), False


def split_top(tokens: list[Token]) -> list[list[Token]]:
    """A token list split at its top-level commas (``Pack<int, 4> p`` stays one)."""
    out: list[list[Token]] = [[]]
    depth = angles = 0  # brackets; angles outside them (a ">" in "(A > B)" closes no template's list)
    for t in tokens:
        if t.text in ("(", "[", "{"):
            depth += 1
        elif t.text in (")", "]", "}"):
            depth -= 1
        elif not depth and t.text in ("<", ">"):
            angles += 1 if t.text == "<" else -1
        if t.text == "," and depth == 0 and angles <= 0:
            out.append([])
        else:
            out[-1].append(t)
    return [p for p in out if p]


def _template_param(part: list[Token]) -> tuple[str, str, str | None]:
    """(type, name, default) of one template parameter; name "" when it has none (``typename = void``,
    ``typename... Ts``)."""
    eq = next((k for k, t in enumerate(part) if t.text == "="), None)
    head, default = (part, None) if eq is None else (part[:eq], spelled(part[eq + 1 :]))
    if len(head) < 2 or head[-1].kind != "id" or any(t.text == "..." for t in head):
        return spelled(head) or "int", "", default
    return spelled(head[:-1]), head[-1].text, default


@dataclass
class _Decl:
    """What one declaration at namespace scope showed so far."""

    template: list[Token] | None = None
    is_global: bool = False
    extern_c: bool = False
    explicit: bool = False  # an explicit instantiation (``template __global__ void k<4>(...)``)
    start: int = 0  # its first token
    named: list[tuple[int, int, int]] = field(default_factory=list)  # (name's index, "(" index, ")" index)


def _qualified(toks: list[Token], i: int) -> str:
    """The name at ``i`` with any ``a::b::`` written before it."""
    j = i
    while j >= 2 and toks[j - 1].text == "::" and toks[j - 2].kind == "id":
        j -= 2
    return "".join(t.text for t in toks[j : i + 1])


def _entry(toks: list[Token], d: _Decl, scope: str, extern_c: bool, body: range) -> Entry | None:
    """The kernel a finished ``__global__`` declaration declares: its last name followed by a parameter list
    (``MACRO(256) k(...)``: k), not an attribute's."""
    if not d.is_global or d.explicit or not d.named:
        return None
    name_at, open_at, close_at = d.named[-1]
    tparams = tuple(_template_param(p) for p in split_top(d.template or []))
    qualified = _qualified(toks, name_at)
    first = name_at - qualified.count("::") * 2  # the qualified name's first token
    ret = [t for t in toks[d.start : first] if t.kind != "pp"]
    returns = _return_type(ret)
    reads = any(toks[k].text == "blockDim" for k in body)
    name = scope + qualified
    return Entry(name, tparams, spelled(toks[open_at + 1 : close_at]), d.extern_c or extern_c, returns, reads)


_SPECIFIERS = frozenset(
    {"__global__", "static", "inline", "__forceinline__", "__noinline__", "extern", "__host__", "constexpr"}
)


def _return_type(tokens: list[Token]) -> str:
    """The return type among a declaration's tokens before its name: what is left once the template header,
    specifiers, attributes (with their parenthesised lists) and ``extern "C"`` are gone."""
    out: list[Token] = []
    k = 0
    while k < len(tokens):
        t = tokens[k]
        if t.text == "template" and k + 1 < len(tokens) and tokens[k + 1].text == "<":
            k = _close_angle(tokens, k + 1)[0] + 1
            continue
        if t.text == "<":  # a template's arguments, kept whole (``enable_if<sizeof(T) == 2>``)
            end = min(_close_angle(tokens, k)[0], len(tokens) - 1)
            out.extend(tokens[k : end + 1])
            k = end + 1
            continue
        if t.kind == "id" and k + 1 < len(tokens) and tokens[k + 1].text == "(" and t.text != "decltype":
            k = _close(tokens, k + 1) + 1  # __launch_bounds__(...), a macro's call
            continue
        if t.text in _SPECIFIERS or t.kind == "str" or t.text == "[":
            k = _close(tokens, k) + 1 if t.text == "[" else k + 1
            continue
        out.append(t)
        k += 1
    return spelled(out) or "void"


def read_entries(source: str) -> list[Entry]:
    """The ``__global__`` functions of a CUDA source, in order, with their template parameters. A function
    inside a namespace is named with it (``myengine::rms_norm``): the name NVRTC looks it up by. Declarations
    and definitions of one kernel each appear; explicit instantiations and specializations do not."""
    toks = tokenize(source)
    out: list[Entry] = []
    scopes: list[str | None] = []  # per open brace: a namespace's name ("" anonymous, "extern C"), None other
    decl = _Decl()
    body_of: tuple[_Decl, int] | None = None  # a kernel whose body is open, and the index of its "{"
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        if scopes and scopes[-1] is None:  # inside a body, a struct, an initializer: braces only
            if t.text == "{":
                scopes.append(None)
            elif t.text == "}":
                scopes.pop()
                if not scopes or scopes[-1] is not None:
                    if body_of is not None:
                        _add(out, toks, body_of[0], scopes, range(body_of[1], i))
                        body_of = None
                    decl = _Decl(start=i + 1)
            i += 1
            continue
        text = t.text
        if t.kind == "pp":
            i += 1
            continue
        if text == "namespace":
            j = i + 1
            while j < n and (toks[j].kind == "id" or toks[j].text == "::"):
                j += 1
            if j < n and toks[j].text == "{":
                scopes.append("".join(x.text for x in toks[i + 1 : j]))
                decl = _Decl(start=j + 1)
                i = j + 1
                continue
            i = j  # an alias or `using namespace`: ends at its ";"
            continue
        if text == "extern" and i + 2 < n and toks[i + 1].text == '"C"' and toks[i + 2].text == "{":
            scopes.append('extern "C"')
            decl = _Decl(start=i + 3)
            i += 3
            continue
        if text == "template" and not (i and toks[i - 1].text in ("::", ".", "->")):
            if i + 1 < n and toks[i + 1].text == "<":
                end, closed = _close_angle(toks, i + 1)
                if closed:
                    decl = _Decl(template=toks[i + 2 : end], start=i)
                    i = end + 1
                else:
                    i = end  # no declaration of a kernel: go on at the ";" or brace
                continue
            else:
                decl.explicit = True
        elif text == "__global__":
            decl.is_global = True
        elif text == "extern" and i + 1 < n and toks[i + 1].text == '"C"':
            decl.extern_c = True
        elif text == "<" and i and toks[i - 1].kind == "id" and toks[i - 1].text not in _NOT_A_NAME:
            end, closed = _close_angle(toks, i)  # a template-id in a return type: its "(" are no declarator's
            i = end + 1 if closed else end
            continue
        elif text in ("(", "["):
            end = _close(toks, i)
            if text == "(" and i and toks[i - 1].kind == "id" and toks[i - 1].text not in _NOT_A_NAME:
                decl.named.append((i - 1, i, end))
            i = end + 1
            continue
        elif text == "{":
            scopes.append(None)
            if decl.is_global:
                body_of = (decl, i)
            decl = _Decl(start=i + 1)
        elif text == "}":
            if scopes:
                scopes.pop()
            decl = _Decl(start=i + 1)
        elif text == ";":
            _add(out, toks, decl, scopes, range(0))
            decl = _Decl(start=i + 1)
        i += 1
    if body_of is not None:  # a body the file never closes (a cut-off file): its kernel still counts
        _add(out, toks, body_of[0], [s for s in scopes if s is not None], range(body_of[1], n))
    return out


def _add(out: list[Entry], toks: list[Token], decl: _Decl, scopes: list[str | None], body: range) -> None:
    names = [s for s in scopes if s and s != 'extern "C"']
    scope = "".join(f"{s}::" for s in names)
    e = _entry(toks, decl, scope, 'extern "C"' in scopes, body)
    if e is not None:
        out.append(e)


def split_params(params: str) -> list[str]:
    """A parameter list split at its top-level commas (``Pack<int, 4> p`` stays one)."""
    out, depth, cur = [], 0, ""
    for ch in params:
        depth += ch in "<([" and 1 or 0
        depth -= ch in ">)]" and 1 or 0
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return [p for p in out if p and p != "void"]


def includes(source: str, quoted: bool = True) -> list[str]:
    """The ``#include "..."`` headers of a source (``quoted=False``: the ``<...>`` ones), in order, once each;
    comments and ``#if 0`` blocks ignored."""
    pat = r'#\s*include\s*"([^"]+)"' if quoted else r"#\s*include\s*<([^>]+)>"
    found = (re.match(r"\s*" + pat, t.text) for t in tokenize(source) if t.kind == "pp")
    return list(dict.fromkeys(m.group(1) for m in found if m))
