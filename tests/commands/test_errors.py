"""Every user mistake gives one clear, located error and nothing else.

Table-driven: each row is the input, fragments the message must contain, and
the exact line:column it must point at. Syntax errors must say what was
expected in the words a user types (never a grammar terminal such as RPAR);
semantic errors carry the location of the offending text; the CLI exits with
status 2, prints the message on stderr and never a traceback. Weird but valid
inputs must still work, and no Python exception other than a
:class:`~costgraph.errors.CostgraphError` may escape for any input.
"""

from __future__ import annotations

import ast as pyast
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphError, CostgraphSemanticError, CostgraphSyntaxError, CostgraphValueError
from costgraph.ops import REGISTRY
from costgraph.language.parser import MAX_DEPTH, parse
from costgraph.language.resources import models_root
from costgraph.engine.symbols import dim

PKG = Path(costgraph.__file__).parent

# A model head used by the semantic rows: statements written after it start on line 6.
M = """model m {
  dim b
  dim s
  dim h
  input x[b, s, h]
"""

# Grammar terminal names: none of them may reach a message.
TERMINALS = re.compile(r"\b(LPAR|RPAR|LSQB|RSQB|LBRACE|RBRACE|COMMA|EQUAL|PLUS|MINUS|STAR|SLASH|COLON|"
                       r"SEMICOLON|NAME|INT|STRING|CONFIG_NAME|__ANON_\d+)\b|\$END")


def error_of(text: str, path: str = "m.cg", **kw) -> CostgraphError:
    """The one error loading ``text`` gives; any other exception fails the test."""
    with pytest.raises(CostgraphError) as info:
        costgraph.loads(text, path=path, **kw)
    return info.value


def check(err: CostgraphError, fragments, line: int, column: int, path: str = "m.cg"):
    text = str(err)
    for fragment in ([fragments] if isinstance(fragments, str) else fragments):
        assert fragment in text, f"{fragment!r} not in:\n{text}"
    assert err.loc is not None, text
    assert (err.loc.file, err.loc.line, err.loc.column) == (path, line, column), text
    assert text.startswith(f"{path}:{line}:{column}: "), text
    assert "Traceback" not in text


# --- syntax errors -------------------------------------------------------------

SYNTAX = [
    # id, text, fragments, line, column
    ("missing closing brace", "model m {\n  dim h\n",
     ["unexpected end of file: expected '}'", "the '{' at 1:9 is never closed"], 2, 8),
    ("missing closing paren", "model m {\n  dim h\n  x = linear(y, h\n}\n",
     ["unexpected '}': expected ')' or ','", "the '(' at 3:13 is not closed"], 4, 1),
    ("missing paren, next statement", "model m {\n  x = f(a, b\n  y = 1\n}\n",
     ["unexpected 'y': expected ')' or ','", "the '(' at 2:8 is not closed"], 3, 3),
    ("missing comma in a call", "model m {\n  x = f(a b)\n}\n",
     "unexpected 'b': expected ')' or ','", 2, 11),
    ("missing comma in parameters", "block f(x y) { return x }\n",
     "unexpected 'y': expected ')', ',', '=' or '['", 1, 11),
    ("paren expression not closed", "model m {\n  x = (a + b\n}\n",
     ["unexpected '}': expected ')'", "the '(' at 2:7 is not closed"], 3, 1),
    ("shape bracket not closed", "model m {\n  input x[b, s\n}\n",
     ["unexpected '}': expected ',' or ']'", "the '[' at 2:10 is not closed"], 3, 1),
    ("wrong closing bracket", "model m {\n  x = f(a]\n}\n",
     ["unexpected ']': expected ')' or ','", "the '(' at 2:8 is not closed"], 2, 10),
    ("extra closing brace", "model m {\n}\n}\n",
     ["unexpected '}'", "this '}' has no '{' to close"], 3, 1),
    ("stray character", "model m {\n  x = a @ b\n}\n",
     ["unexpected character '@'", "matmul(x, y)"], 2, 9),
    ("unicode times sign", "model m {\n  x = a × b\n}\n",
     ["unexpected character '×'", "multiplication is written '*'"], 2, 9),
    ("non-ASCII name", "model m {\n  dim é\n}\n",
     ["unexpected character 'é'", "ASCII"], 2, 7),
    ("decimal number", "model m {\n  x = 1.5\n}\n",
     ["numbers are whole numbers", "8 * h / 3"], 2, 8),
    ("unary minus", "model m {\n  x = -a\n}\n",
     "unexpected '-': expected an expression", 2, 7),
    ("single quotes", "model m {\n  dim h 'hidden'\n}\n",
     ["unexpected character", 'double quotes'], 2, 9),
    ("non-breaking space", "model m {\n  dim\u00a0h\n}\n",
     ["unexpected character '\\xa0'", "non-breaking space"], 2, 6),
    ("unterminated string", 'model m {\n  dim h "hidden size\n}\n',
     ["unterminated string", 'a string ends with " on the same line'], 2, 9),
    ("unterminated string at end of file", 'import "std',
     "unterminated string", 1, 8),
    ("repeat without as NAME", "model m {\n  dim l\n  repeat l { }\n}\n",
     ["unexpected '{': expected 'as'", "repeat COUNT as NAME"], 3, 12),
    ("repeat as without a name", "model m {\n  repeat l as { }\n}\n",
     ["unexpected '{': expected a name after 'as'", "repeat COUNT as NAME"], 2, 15),
    ("keyword as a variable", "model m {\n  repeat = 3\n}\n",
     ["unexpected '=': expected an expression after 'repeat'", "'repeat' is a keyword"], 2, 10),
    ("dim with no name", "model m {\n  dim\n}\n",
     ["unexpected '}': expected a name after 'dim'", "dim NAME"], 3, 1),
    ("dim assigned like a variable", "model m {\n  dim = 3\n}\n",
     ["expected a name after 'dim'", "'dim' is a keyword and cannot be a variable's name"], 2, 7),
    ("empty model body missing", "model m\n",
     ["unexpected end of file: expected 'extends' or '{'", "model NAME { ... }"], 1, 8),
    ("model with no name", "model {\n}\n",
     "unexpected '{': expected a name after 'model'", 1, 7),
    ("block with no parameter list", "block f { return x }\n",
     ["unexpected '{': expected '('", "block NAME("], 1, 9),
    ("block with no body", "block f(x)\n",
     "unexpected end of file: expected '{'", 1, 11),
    ("config entry without =", "config c { h 768 }\n",
     ["unexpected '768': expected '='", "config NAME { h = 768, l = 12 }"], 1, 14),
    ("config entry without value", "config c { h = }\n",
     "unexpected '}': expected an expression", 1, 16),
    ("config entries without comma", "config c { h = 1 l = 2 }\n",
     "unexpected 'l': expected ',' or '}'", 1, 18),
    ("config with no name", "config { h = 1 }\n",
     "expected a configuration name after 'config'", 1, 8),
    ("import without quotes", "import std/attention.cg\n",
     ["unexpected 'std': expected a quoted string (\"...\") after 'import'", 'import "path/to/file.cg"'], 1, 8),
    ("input with no shape", "model m {\n  input x\n}\n",
     ["unexpected '}': expected '['", "input NAME[b, s]"], 3, 1),
    ("input role without colon", "model m {\n  dim b\n  input t[b] index\n  return t\n}\n",
     ["unexpected 'index' after an input: expected ':' before it", "input NAME[...]: index"], 3, 14),
    ("option without value", "model m {\n  option bias\n}\n",
     ["unexpected '}': expected '='", "option NAME = VALUE"], 3, 1),
    ("operator with nothing after it", "model m {\n  x = a +\n}\n",
     "unexpected '}': expected an expression", 3, 1),
    ("return with nothing", "model m {\n  return\n}\n",
     "unexpected '}': expected an expression after 'return'", 3, 1),
    # `return x, y` is a model's several outputs (DeepSeek-V3's MTP logits); a dangling comma is not
    ("return with a trailing comma", "model m {\n  return x,\n}\n",
     "unexpected '}': expected an expression", 3, 1),
    ("keyword argument without value", "model m {\n  x = f(a, bias=)\n}\n",
     "unexpected ')': expected an expression", 2, 17),
    ("double comma", "model m {\n  x = f(a,, b)\n}\n",
     "unexpected ',': expected an expression", 2, 11),
    ("statement outside a model", "x = 3\n",
     ["unexpected 'x': expected 'block', 'config', 'import', 'model'",
      "statements belong inside a model or block"], 1, 1),
    ("misspelt keyword", "modle m {\n}\n",
     ["unexpected 'modle'", "did you mean 'model'?"], 1, 1),
    ("misspelt statement keyword", "model m {\n  dimm h\n}\n",
     ["unexpected 'h': expected ',' or '='", "did you mean 'dim'?"], 2, 8),
    ("name starting with a digit", "model m {\n  3x = 1\n}\n",
     ["unexpected '3'", "a name starts with a letter or '_'"], 2, 3),
    ("if without body", "model m {\n  option o = true\n  if o\n}\n",
     ["unexpected '}': expected '{'", "if COND { ... }"], 4, 1),
    ("comparison with one '='", "model m {\n  if i = 0 { }\n}\n",
     ["unexpected '=': expected '{'", "a comparison is written '=='"], 2, 8),
    ("else without if", "model m {\n  else { }\n}\n",
     ["unexpected '{': expected ',' or '='", "an else follows the '}' of an if"], 2, 8),
    ("end of file after a keyword", "model m { dim",
     ["unexpected end of file: expected a name", "the '{' at 1:9 is never closed"], 1, 14),
    ("tab before the error", "model m {\n\tx = f(a b)\n}\n",
     ["unexpected 'b'", "\n    \tx = f(a b)\n    \t        ^"], 2, 10),
    ("Windows line ends", "model m {\r\n  x = f(a b)\r\n}\r\n",
     "unexpected 'b': expected ')' or ','", 2, 11),
    ("number too large", "model m {\n  dim k = " + "9" * 150 + "\n}\n",
     "number too large: it has 150 digits (at most 100)", 2, 11),
    ("nesting too deep", "model m {\n  return " + "gelu(" * 300 + "x" + ")" * 300 + "\n}\n",
     ["nested too deeply", f"more than {MAX_DEPTH} levels"], 2, 490),
    ("control character", "model m {\n  dim h\x00\n}\n",
     ["unexpected character '\\x00'", "control character"], 2, 8),
]


@pytest.mark.parametrize("text, fragments, line, column", [r[1:] for r in SYNTAX], ids=[r[0] for r in SYNTAX])
def test_syntax_error(text, fragments, line, column):
    err = error_of(text)
    assert isinstance(err, CostgraphSyntaxError), str(err)
    check(err, fragments, line, column)
    assert not TERMINALS.search(err.message), f"a grammar terminal in: {err.message}"
    assert "\r" not in str(err)


def test_parse_itself_raises_the_syntax_error():
    with pytest.raises(CostgraphSyntaxError) as info:
        parse("model m {\n  x = f(a b)\n}\n", "direct.cg")
    assert str(info.value).splitlines()[0] == "direct.cg:2:11: syntax error: unexpected 'b': expected ')' or ','"


def test_long_line_is_cut_around_the_column():
    err = error_of("model m {\n  x = " + "a + " * 100 + "@\n}\n")
    shown, caret = str(err).splitlines()[1:3]
    assert len(shown) < 120 and shown.rstrip().endswith("@")
    assert caret.index("^") == shown.index("@")


# --- semantic errors -------------------------------------------------------------

SEMANTIC = [
    # id, text, fragments, line, column
    ("unknown operator", M + "  y = lineer(x, h)\n  return y\n}\n",
     ["unknown operator or block 'lineer'", "did you mean 'linear'?"], 6, 7),
    ("undefined tensor", M + "  y = linear(z, h)\n  return y\n}\n",
     "'z' is not defined", 6, 14),
    ("undefined dimension in an argument", M + "  y = linear(x, q)\n  return y\n}\n",
     "'q' is not defined", 6, 17),
    ("undefined dimension in a shape", "model m {\n  dim b\n  input x[b, q]\n  return x\n}\n",
     "'q' is not defined", 3, 14),
    ("too many arguments", M + "  return relu2(x, h)\n}\n",   # gelu(x, keep = ...) takes 2 now
     "relu2 takes 1 argument(s) (x), 2 given", 6, 19),
    ("unknown keyword argument", M + "  return linear(x, h, biass = false)\n}\n",
     ["linear has no argument 'biass'", "did you mean 'bias'?"], 6, 23),
    ("argument given twice", M + "  return linear(x, h, out = h)\n}\n",
     "argument 'out' of linear is given twice", 6, 23),
    ("missing required argument", M + "  return linear(x)\n}\n",
     "linear needs the argument 'out'", 6, 10),
    ("dimension where a tensor is expected", M + "  return linear(h, h)\n}\n",
     "argument 'x' of linear must be a tensor, got the dimension h", 6, 17),
    ("tensor where a dimension is expected", M + "  return linear(x, x)\n}\n",
     "argument 'out' of linear must be a dimension expression, got a tensor [b, s, h]", 6, 20),
    ("string where a dimension is expected", M + '  return linear(x, "h")\n}\n',
     'argument \'out\' of linear must be a dimension expression, got the string "h"', 6, 20),
    ("true where a dimension is expected", M + "  return linear(x, true)\n}\n",
     "got the value true", 6, 20),
    ("dimension where true/false is expected", M + "  return linear(x, h, bias = h)\n}\n",
     "argument 'bias' of linear must be true or false, got the dimension h", 6, 23),
    ("name= that is not a name", M + '  return gelu(x, name = "g")\n}\n',
     "name= takes a bare name", 6, 18),
    ("matmul inner dimensions differ", M + "  input y[b, s, s]\n  return matmul(x, y)\n}\n",
     ["matmul inner dimensions differ", "[b, s, h] · [b, s, s]", "h ≠ s"], 7, 10),
    ("shapes that do not broadcast", M + "  input y[b, h]\n  return x + y\n}\n",
     "shapes do not broadcast: [b, s, h] and [b, h]", 7, 10),
    ("tensor plus dimension", M + "  return x + h\n}\n",
     "cannot apply '+' to a tensor [b, s, h] and the dimension h", 6, 10),
    ("tensor divided by tensor", M + "  return x / x\n}\n",
     "tensors cannot be divided with '/'", 6, 10),
    ("blocks call each other in a cycle",
     "block a(x) { return b(x) }\nblock b(x) { return a(x) }\n" + M + "  return a(x)\n}\n",
     ["blocks call each other in a cycle: a → b → a", "use repeat for depth"], 2, 21),
    ("block calls itself", "block a(x) { return a(x) }\n" + M + "  return a(x)\n}\n",
     "blocks call each other in a cycle: a → a", 1, 21),
    ("repeat changes a carried shape", M + "  dim l\n  repeat l as layers {\n    x = linear(x, 2 * h)\n  }\n"
                                           "  return x\n}\n",
     ["the repeat body changes 'x' from a tensor [b, s, h] to a tensor [b, s, 2*h]", "same shape"], 7, 3),
    ("repeat turns a tensor into a dimension", M + "  dim l\n  repeat l as layers { x = h }\n  return x\n}\n",
     "changes 'x' from a tensor [b, s, h] to the dimension h", 7, 3),
    ("duplicate name=", M + "  y = gelu(x, name = g)\n  z = gelu(y, name = g)\n  return z\n}\n",
     "the name 'g' is used twice in the model", 7, 7),
    ("duplicate repeat name", M + "  dim l\n  repeat l as r { x = gelu(x) }\n  repeat l as r { x = gelu(x) }\n"
                                  "  return x\n}\n",
     "the name 'r' is used twice in the model", 8, 3),
    ("unknown import", 'import "nope.cg"\n' + M + "  return x\n}\n",
     ["cannot find the imported file 'nope.cg'", "std/attention.cg"], 1, 1),
    ("tie to a weight that does not exist", M + "  dim V\n  return linear(x, V, tied = wte)\n}\n",
     "nothing named 'wte' with a weight to tie to", 7, 10),
    ("tie to a node without a weight", M + "  y = gelu(x, name = g)\n  return linear(y, h, tied = g)\n}\n",
     "'g' (a gelu) has no weight to tie to", 7, 10),
    ("tie to a weight of another shape", M + "  dim V\n  y = linear(x, V, name = wte)\n"
                                             "  return linear(x, h, tied = wte)\n}\n",
     "cannot tie to 'wte': its weight is [V, h], this linear needs [h, h]", 8, 10),
    ("config sets an unknown dimension", M + "  return x\n}\nconfig c { h = 1, zz = 3 }\n",
     "configuration 'c' sets 'zz', which is not a dimension of 'm'", 8, 19),
    ("config misspells a dimension", M + "  return x\n}\nconfig c { hh = 3 }\n",
     ["sets 'hh'", "did you mean 'h'?"], 8, 12),
    ("config sets a derived dimension", M + "  dim k = 2 * h\n  return x\n}\nconfig c { k = 4 }\n",
     "'k' is derived; a configuration cannot set it", 9, 12),
    ("config sets zero", M + "  return x\n}\nconfig c { h = 0 }\n",
     "'h' must be a positive whole number", 8, 12),
    ("config defined twice", M + "  return x\n}\nconfig c { h = 1 }\nconfig c { h = 2 }\n",
     "configuration 'c' is defined twice", 9, 1),
    ("model returns a dimension", M + "  return h\n}\n",
     "a model returns tensors, not the dimension h", 6, 3),
    ("model returns nothing", M + "  y = gelu(x)\n}\n",
     ["model 'm' returns nothing", "return logits"], 1, 1),
    ("block returns nothing", "block f(x) { y = gelu(x) }\n" + M + "  return f(x)\n}\n",
     "block 'f' returns nothing", 1, 1),
    ("return inside a repeat", M + "  dim l\n  repeat l as r { return x }\n  return x\n}\n",
     "return cannot be inside a repeat", 7, 19),
    ("dimension defined twice", M + "  dim h\n  return x\n}\n",
     "'h' is already defined", 6, 3),
    ("option that is not true/false", M + "  option k = 3\n  return x\n}\n",
     "option 'k' must be true or false, got the dimension 3", 6, 3),
    ("option defined twice", M + "  option o = true\n  option o = false\n  return x\n}\n",
     "option 'o' is defined twice", 7, 3),
    ("option inside a block", "block f(x) {\n  option q = true\n  return x\n}\n" + M + "  return f(x)\n}\n",
     "options belong to the model", 2, 3),
    ("input inside a block", "block f(x) {\n  input y[b]\n  return x\n}\n" + M + "  return f(x)\n}\n",
     "inputs belong to the model", 2, 3),
    ("free dimension inside a block", "block f(x) {\n  dim q\n  return x\n}\n" + M + "  return f(x)\n}\n",
     "a free dimension 'q' can only be declared in the model", 2, 3),
    ("unknown tensor role", M + "  input t[b]: foo\n  return x\n}\n",
     ["unknown tensor role 'foo'", "act"], 6, 3),
    ("if on a dimension", M + "  if h { x = gelu(x) }\n  return x\n}\n",
     "an if needs true or false, got the dimension h", 6, 3),
    ("constant redefined", M + "  true = x\n  return x\n}\n",
     "'true' is a constant (true, false, none) and cannot be redefined", 6, 3),
    ("two names for one tensor", M + "  a, c = gelu(x)\n  return a\n}\n",
     "2 names on the left, but the right gives a tensor [b, s, h]", 6, 3),
    ("block argument of the wrong rank", "block f(x[B, S, H]) { return x }\n"
                                         "model m {\n  dim b\n  dim h\n  input y[b, h]\n  return f(y)\n}\n",
     "argument 'x' of f must have 3 dimensions [B, S, H], got [b, h]", 6, 10),
    ("block argument that is not a tensor", "block f(x[B, S, H]) { return x }\n" + M + "  return f(h)\n}\n",
     "argument 'x' of f must be a tensor [B, S, H], got the dimension h", 7, 10),
    ("block argument of the wrong shape", "block f(x[B, S, 2 * S]) { return x }\n" + M + "  return f(x)\n}\n",
     "argument 'x' of f must be [B, S, 2*S], got [b, s, h]", 7, 10),
    ("block given too many arguments", "block f(x) { return x }\n" + M + "  return f(x, h)\n}\n",
     "block f takes 1 argument(s) (x), 2 given", 7, 15),
    ("block missing an argument", "block f(x, y) { return x }\n" + M + "  return f(x)\n}\n",
     "block f needs the argument 'y'", 7, 10),
    ("block given an unknown keyword", "block f(x, width) { return x }\n" + M + "  return f(x, widht = h)\n}\n",
     ["block f has no argument 'widht'", "did you mean 'width'?"], 7, 15),
    ("block defined twice", "block f(x) { return x }\nblock f(x) { return x }\n" + M + "  return f(x)\n}\n",
     "block 'f' is defined twice", 2, 1),
    ("block with two parameters of one name", "block f(x, x) { return x }\n" + M + "  return f(x, x)\n}\n",
     "block 'f' has two parameters named 'x'", 1, 12),
    ("two models in a file", M + "  return x\n}\nmodel n {\n}\n",
     "a model file must define exactly one model, found 2", 8, 1),
    ("no model in a file", "block f(x) { return x }\n",
     "'m.cg' is a library of blocks (f) with no model to derive", 1, 1),
    ("empty file", "",
     "a model file must define exactly one model, found 0", 1, 1),
    ("division by zero", M + "  dim k = h / 0\n  return linear(x, k)\n}\n",
     "division by zero", 6, 15),
    ("zero-sized dimension", M + "  return linear(x, h - h)\n}\n",
     "argument 'out' of linear must be a positive whole number, got 0", 6, 20),
    ("negative shape", M + "  input y[0 - 1]\n  return x\n}\n",
     "the shape of 'y' must be a positive whole number, got -1", 6, 11),
    ("fractional shape", M + "  input y[1 / 2]\n  return x\n}\n",
     "the shape of 'y' must be a positive whole number, got 1/2", 6, 11),
    ("repeat zero times", M + "  repeat 0 as r { x = gelu(x) }\n  return x\n}\n",
     "a repeat count must be a positive whole number, got 0", 6, 10),
    ("repeat count that is a tensor", M + "  repeat x as r { x = gelu(x) }\n  return x\n}\n",
     "a repeat count must be a dimension expression, got a tensor [b, s, h]", 6, 10),
    ("number grown too large", M + "  dim k = " + " * ".join(["9" * 60] * 2) + "\n  return linear(x, k)\n}\n",
     "number too large", 6, 11),
    ("split of a scalar", "model m {\n  input x[]\n  a, c = split(x, 2)\n  return a\n}\n",
     "split needs a tensor with at least one dimension", 3, 10),
    ("split into absurdly many parts", M + "  y = split(x, 100000000)\n  return x\n}\n",
     "split into 100000000 parts: at most 1024", 6, 7),
    ("split into a symbolic number of parts", M + "  y = split(x, h)\n  return x\n}\n",
     "split needs a whole number of parts, got h", 6, 7),
    ("transpose of a vector", "model m {\n  dim b\n  input x[b]\n  return transpose(x)\n}\n",
     "transpose needs a tensor of rank ≥ 2, got [b]", 4, 10),
    ("linear of a scalar", "model m {\n  input x[]\n  return linear(x, 3)\n}\n",
     "linear needs a tensor with at least one dimension", 3, 10),
    ("embedding of activations", M + "  dim V\n  return embedding(x, V, h)\n}\n",
     "embedding looks up token ids", 7, 10),
    ("extends a model no file defines", "model mine extends nobody {\n  option bias = true\n}\n",
     "model 'mine' extends 'nobody', which no imported file defines", 1, 1),
    ("extends with an unknown option", 'import "llama.cg"\nmodel mine extends llama {\n'
                                       "  option slidin_window = true\n}\n",
     ["'llama' has no option 'slidin_window'", "did you mean 'sliding_window'?"], 3, 3),
]


@pytest.mark.parametrize("text, fragments, line, column", [r[1:] for r in SEMANTIC], ids=[r[0] for r in SEMANTIC])
def test_semantic_error(text, fragments, line, column):
    err = error_of(text)
    assert isinstance(err, CostgraphSemanticError), str(err)
    check(err, fragments, line, column)


def test_unknown_model_option_is_located_at_the_model():
    err = error_of(M + "  option bias = true\n  return x\n}\n", options={"biass": False})
    check(err, ["model 'm' has no option 'biass'", "its options: bias"], 1, 1)


def test_option_set_to_a_number_through_the_api():
    err = error_of(M + "  option bias = true\n  return x\n}\n", options={"bias": 3})
    check(err, "option 'bias' must be set to true or false, got 3", 6, 3)


def test_block_calls_nested_too_deep():
    blocks = "".join(f"block b{i}(x) {{ return b{i + 1}(x) }}\n" for i in range(60)) + "block b60(x) { return x }\n"
    err = error_of(blocks + M + "  return b0(x)\n}\n")
    check(err, "blocks call each other more than 50 deep", 50, 23)


# --- errors across files -------------------------------------------------------------

def test_import_cycle(tmp_path):
    a, b = tmp_path / "a.cg", tmp_path / "b.cg"
    a.write_text('import "b.cg"\n' + M + "  return x\n}\n")
    b.write_text('import "a.cg"\nblock f(x) { return x }\n')
    with pytest.raises(CostgraphSemanticError) as info:
        costgraph.load(str(a))
    check(info.value, ["import cycle: ", "a.cg → ", "b.cg → ", "move the shared blocks into a third file"],
          1, 1, path=str(b))
    assert re.search(r"a\.cg → .*b\.cg → .*a\.cg", info.value.message)


def test_file_imports_itself(tmp_path):
    a = tmp_path / "a.cg"
    a.write_text('import "a.cg"\n' + M + "  return x\n}\n")
    with pytest.raises(CostgraphSemanticError) as info:
        costgraph.load(str(a))
    check(info.value, "import cycle: ", 1, 1, path=str(a))


def test_import_cycle_from_text(tmp_path):
    a = tmp_path / "a.cg"
    (tmp_path / "b.cg").write_text('import "a.cg"\n')
    a.write_text('import "b.cg"\n' + M + "  return x\n}\n")
    with pytest.raises(CostgraphSemanticError) as info:
        costgraph.loads(a.read_text(), path=str(a))
    assert "import cycle" in info.value.message


def test_syntax_error_in_an_imported_file_points_into_it(tmp_path):
    lib = tmp_path / "lib.cg"
    lib.write_text("block f(x) {\n  return gelu(x\n}\n")
    main_file = tmp_path / "main.cg"
    main_file.write_text('import "lib.cg"\n' + M + "  return f(x)\n}\n")
    with pytest.raises(CostgraphSyntaxError) as info:
        costgraph.load(str(main_file))
    check(info.value, "unexpected '}': expected ')' or ','", 3, 1, path=str(lib))


def test_semantic_error_in_an_imported_block_points_into_it(tmp_path):
    lib = tmp_path / "lib.cg"
    lib.write_text("block f(x) {\n  return lineer(x)\n}\n")
    main_file = tmp_path / "main.cg"
    main_file.write_text('import "lib.cg"\n' + M + "  return f(x)\n}\n")
    with pytest.raises(CostgraphSemanticError) as info:
        costgraph.load(str(main_file))
    check(info.value, "unknown operator or block 'lineer'", 2, 10, path=str(lib))


def test_import_of_a_directory(tmp_path):
    (tmp_path / "sub.cg").mkdir()
    err = error_of('import "sub.cg"\n' + M + "  return x\n}\n", path=str(tmp_path / "m.cg"))
    check(err, "cannot find the imported file 'sub.cg'", 1, 1, path=str(tmp_path / "m.cg"))


def test_import_of_a_binary_file(tmp_path):
    (tmp_path / "bin.cg").write_bytes(b"block f(x) { return x }\n\x89PNG\x00\xff\n")
    err = error_of('import "bin.cg"\n' + M + "  return x\n}\n", path=str(tmp_path / "m.cg"))
    assert isinstance(err, CostgraphValueError)
    check(err, ["not a UTF-8 text file: invalid start byte 0x89", "m.cg:1:1)"], 2, 1, path=str(tmp_path / "bin.cg"))


def test_binary_model_file(tmp_path):
    f = tmp_path / "model.cg"
    f.write_bytes(bytes(range(256)))
    with pytest.raises(CostgraphValueError) as info:
        costgraph.load(str(f))
    check(info.value, ["not a UTF-8 text file: invalid start byte 0x80"], 2, 118, path=str(f))


def test_import_name_too_long():
    err = error_of('import "' + "a" * 5000 + '.cg"\n' + M + "  return x\n}\n")
    check(err, "cannot find the imported file", 1, 1)


@pytest.mark.parametrize("model, fragments", [
    ("gtp", ["unknown model 'gtp'", "did you mean 'gpt'?"]),
    ("nonexistent.cg", "no such model file: nonexistent.cg"),
    ("", "no model given"),
    ("a" * 5000, "unknown model"),
])
def test_unknown_model_names(model, fragments):
    with pytest.raises(CostgraphValueError) as info:
        costgraph.load(model)
    for f in [fragments] if isinstance(fragments, str) else fragments:
        assert f in str(info.value)


def test_directory_as_model(tmp_path):
    with pytest.raises(CostgraphValueError) as info:
        costgraph.load(str(tmp_path))
    assert "is a directory, not a model file" in str(info.value)


# --- unusual but valid inputs still work ------------------------------------------------

H = sympy.Symbol("h", positive=True, integer=True)

VALID = [
    # id, text, expected params
    ("no repeat", M + "  return linear(x, h)\n}\n", H**2 + H),
    ("nested repeats", M + "  dim l\n  dim k\n  repeat l as outer {\n    repeat k as inner {\n"
                           "      x = linear(x, h)\n    }\n  }\n  return x\n}\n",
     dim("l") * dim("k") * (H**2 + H)),
    ("block that returns a dimension", "block width(x[B, S, H]) { return 4 * H }\n" + M
     + "  return linear(x, width(x), bias = false)\n}\n", 4 * H**2),
    ("block that does no call", "block same(x) { return x }\n" + M + "  return same(x)\n}\n", 0),
    ("deep parentheses", M + "  dim k = " + "(" * 500 + "h" + ")" * 500 + "\n  return linear(x, k)\n}\n", H**2 + H),
    ("23-digit number", M + "  return linear(x, 99999999999999999999999, bias = false)\n}\n",
     99999999999999999999999 * H),
    ("unicode in strings and comments", 'model m {  # größe ✓\n  dim b "Stapel ✓"\n  dim s\n  dim h "ε"\n'
                                        "  input x[b, s, h]\n  return linear(x, h)  # ∀\n}\n", H**2 + H),
    ("byte-order mark", "\ufeff" + M + "  return linear(x, h)\n}\n", H**2 + H),
    ("Windows line ends and tabs", (M + "\treturn linear(x, h)\n}\n").replace("\n", "\r\n"), H**2 + H),
    ("keywords of other places as names", M + "  model = gelu(x)\n  block = model\n  config = block\n"
                                               "  return linear(config, h)\n}\n", H**2 + H),
    ("semicolons", "model m { dim b; dim s; dim h; input x[b, s, h]; return linear(x, h); }", H**2 + H),
    ("deepest block chain around the deepest expression",
     "".join(f"block b{i}(x) {{ return b{i + 1}(x) }}\n" for i in range(49))
     + "block b49(x) { return " + "gelu(" * 90 + "x" + ")" * 90 + " }\n" + M + "  return linear(b0(x), h)\n}\n",
     H**2 + H),
    ("long file", M + "  x = linear(x, h)\n" * 2000 + "  return x\n}\n", 2000 * (H**2 + H)),
    ("many automatic names", M + "  y = gelu(x, name = gelu_7)\n" + "  x = gelu(x)\n" * 500 + "  return x\n}\n", 0),
]


@pytest.mark.parametrize("text, params", [r[1:] for r in VALID], ids=[r[0] for r in VALID])
def test_unusual_valid_input(text, params):
    costs = costgraph.loads(text, path="m.cg").costs("model")
    assert sympy.expand(costs.params - params) == 0


def test_automatic_names_are_unchanged():
    g = costgraph.loads(M + "  y = gelu(x, name = gelu_2)\n  x = gelu(x)\n  x = gelu(x)\n  x = gelu(x)\n"
                            "  return x\n}\n").nx
    assert [n for n in g.nodes if n.startswith("gelu")] == ["gelu_2", "gelu", "gelu_1", "gelu_3"]


# --- no input may raise anything but a CostgraphError -----------------------------

def _fuzz_inputs(n: int = 400) -> list[str]:
    base = (models_root() / "gpt.cg").read_text(encoding="utf-8")
    rng = random.Random(20240517)
    pieces = list("(){}[],=+-*/:;\"#@.\n ") + ["repeat", "as", "dim", "return", "x", "h", "0", "linear(",
                                                 "name =", "tied =", "active", "if", "else", "extends"]
    out = [base[:i] for i in range(0, len(base), 97)]
    for _ in range(n):
        i = rng.randrange(len(base))
        op = rng.randrange(3)
        if op == 0:
            out.append(base[:i] + base[i + rng.randrange(1, 12):])
        elif op == 1:
            out.append(base[:i] + rng.choice(pieces) + base[i:])
        else:
            j = rng.randrange(len(base))
            out.append(base[:i] + base[j:j + rng.randrange(1, 40)] + base[i:])
    return out


def test_fuzzed_model_files_raise_only_costgraph_errors():
    for text in _fuzz_inputs():
        try:
            costgraph.loads(text, path="fuzz.cg").costs("model")
        except CostgraphError as e:
            assert e.loc is None or (e.loc.line >= 1 and e.loc.column >= 1), str(e)
            str(e)   # renders


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_operator_on_every_rank_raises_only_costgraph_errors(name):
    spec = REGISTRY[name]
    shapes = ["", "b", "b, s", "b, s, h", "b, a, s, h"]
    values = {"dim": ["2", "h", "1"], "bool": ["true", "false"], "ident": ["none", "nothing"]}
    for sx in shapes:
        for sy in shapes:
            for extra in range(3):
                args = []
                for p in spec.params:
                    if p.kind == "tensor":
                        args.append(f"{p.name} = {'x' if not args else 'y'}")
                    elif p.kind in values:
                        args.append(f"{p.name} = {values[p.kind][extra % len(values[p.kind])]}")
                text = (f"model m {{\n  dim b\n  dim s\n  dim h\n  dim a\n  input x[{sx}]\n  input y[{sy}]\n"
                        f"  z = {name}({', '.join(args)})\n  return x\n}}\n")
                try:
                    costgraph.loads(text).costs("model")
                except CostgraphError as e:
                    assert e.loc is not None and e.loc.line in (6, 7, 8), str(e)


# --- text is never evaluated ------------------------------------------------------------

def test_no_eval_exec_or_expression_parsing_in_the_source():
    functions = {"eval", "exec", "compile", "__import__", "parse_expr", "sympify", "S"}   # called by name
    methods = {"parse_expr", "literal_eval", "parse_latex", "exec"}                      # called as x.name()
    for path in PKG.rglob("*.py"):
        tree = pyast.parse(path.read_text(encoding="utf-8"))
        for node in pyast.walk(tree):
            if isinstance(node, pyast.ImportFrom) and node.module and "sympy" in node.module:
                assert not {a.name for a in node.names} & {"sympify", "parse_expr", "S"}, f"{path.name}:{node.lineno}"
            if not isinstance(node, pyast.Call):
                continue
            f = node.func
            if isinstance(f, pyast.Name) and f.id in functions:
                pytest.fail(f"{path.name}:{node.lineno}: calls {f.id}()")
            if isinstance(f, pyast.Attribute) and (f.attr in methods or (
                    f.attr == "eval" and isinstance(f.value, pyast.Name) and f.value.id == "builtins")):
                pytest.fail(f"{path.name}:{node.lineno}: calls .{f.attr}()")


def test_strings_from_a_file_never_reach_sympify(monkeypatch):
    real = sympy.sympify

    def guarded(a, *args, **kwargs):
        assert not isinstance(a, str), f"sympify got text: {a!r}"
        return real(a, *args, **kwargs)

    monkeypatch.setattr(sympy, "sympify", guarded)
    texts = [M + '  return linear(x, "h * h")\n}\n',
             M + '  input y["__import__(\'os\').system(\'true\')"]\n  return x\n}\n',
             M + '  dim k = "2 * h"\n  return linear(x, k)\n}\n',
             M + '  return split(x, "3")\n}\n',
             M + '  return x\n}\nconfig c { h = "768" }\n']
    for text in texts:
        with pytest.raises(CostgraphError):
            costgraph.loads(text)
    costgraph.load("gpt").costs("model")


# --- the command line -------------------------------------------------------------

@pytest.fixture
def files(tmp_path):
    """Bad model files for the CLI rows, by name."""
    out = {}
    for name, content in {
        "syntax.cg": "model m {\n  dim h\n  x = linear(y, h\n}\n",
        "semantic.cg": M + "  y = lineer(x, h)\n  return y\n}\n",
        "cycle.cg": "block a(x) { return b(x) }\nblock b(x) { return a(x) }\n" + M + "  return a(x)\n}\n",
        "good.cg": M + "  option bias = true\n  return linear(x, h, bias = bias)\n}\nconfig c { h = 4 }\n",
    }.items():
        (tmp_path / name).write_text(content)
        out[name[:-3]] = str(tmp_path / name)
    (tmp_path / "binary.cg").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    out["binary"] = str(tmp_path / "binary.cg")
    (tmp_path / "latin1.cg").write_bytes("model m {\n  dim h \"größe\"\n}\n".encode("latin-1"))
    out["latin1"] = str(tmp_path / "latin1.cg")
    (tmp_path / "dir.cg").mkdir()
    out["dircg"] = str(tmp_path / "dir.cg")
    out["dir"] = str(tmp_path)
    (tmp_path / "a.cg").write_text('import "b.cg"\n' + M + "  return x\n}\n")
    (tmp_path / "b.cg").write_text('import "a.cg"\n')
    out["a"] = str(tmp_path / "a.cg")
    out["b"] = str(tmp_path / "b.cg")
    return out


CLI = [
    # id, arguments ({name} is a file of the fixture), fragments of stderr ({name} too)
    ("syntax error", ["derive", "{syntax}"],
     ["{syntax}:4:1: syntax error: unexpected '}}': expected ')' or ','"]),
    ("semantic error", ["derive", "{semantic}"],
     ["{semantic}:6:7: error: unknown operator or block 'lineer'", "did you mean 'linear'?"]),
    ("block cycle", ["derive", "{cycle}"], ["{cycle}:2:21: error: blocks call each other in a cycle"]),
    ("import cycle", ["derive", "{a}"], ["{b}:1:1: error: import cycle"]),
    ("unknown bundled model", ["derive", "gtp"], ["unknown model 'gtp'", "did you mean 'gpt'?"]),
    ("nonexistent path", ["derive", "no/such/model.cg"], ["no such model file: no/such/model.cg"]),
    ("empty model name", ["derive", ""], ["no model given"]),
    ("directory", ["derive", "{dir}"], ["is a directory, not a model file"]),
    ("directory named .cg", ["derive", "{dircg}"], ["is a directory, not a model file"]),
    ("binary file", ["derive", "{binary}"], ["{binary}:1:1: error: not a UTF-8 text file: invalid start byte 0x89"]),
    ("latin-1 file", ["derive", "{latin1}"], ["{latin1}:2:12: error: not a UTF-8 text file: invalid start byte 0xf6"]),
    ("--set not a number", ["derive", "gpt", "--set", "h=abc"], ["cannot read --set 'h=abc'", "NAME=VALUE"]),
    ("--set zero", ["derive", "gpt", "--set", "h=0"], ["--set 'h=0': a dimension is a positive whole number"]),
    ("--set negative", ["derive", "gpt", "--set", "h=-1"], ["--set 'h=-1': a dimension is a positive whole number"]),
    ("--set unknown dimension", ["derive", "gpt", "--set", "zz=3"],
     ["model 'gpt' has no dimension 'zz'", "its dimensions: b, s, h"]),
    ("--set derived dimension", ["derive", "{good}", "--set", "h=4"], None),
    ("--set huge number", ["derive", "gpt", "--set", "h=" + "9" * 200], ["number too large"]),
    ("--set unknown option", ["derive", "gpt", "--set", "biass=false"],
     ["model 'gpt' has no option 'biass'", "its options: bias"]),
    ("--set without value", ["derive", "gpt", "--set", "h="], ["cannot read --set 'h='"]),
    ("unknown --config", ["derive", "gpt", "--config", "gpt5"],
     ["model 'gpt' has no configuration 'gpt5'", "gpt2"]),
    ("unknown --config with latex", ["derive", "gpt", "--config", "gpt5", "--format", "latex"],
     ["no configuration 'gpt5'"]),
    ("unknown --scope", ["derive", "gpt", "--scope", "lyer"], ["no scope 'lyer' in model 'gpt'"]),
    ("unknown --format", ["derive", "gpt", "--format", "xml"], ["invalid choice: 'xml'"]),
    ("missing model argument", ["derive"], ["the following arguments are required: model"]),
    ("unknown command", ["drive", "gpt"], ["invalid choice: 'drive'"]),
]


def _fill(items, files):
    return [s.format(**files) for s in items]


@pytest.mark.parametrize("args, fragments", [r[1:] for r in CLI], ids=[r[0] for r in CLI])
def test_cli_error(args, fragments, files, capsys):
    status = main(_fill(args, files))
    out, err = capsys.readouterr()
    if fragments is None:            # a valid command in the table: it must succeed
        assert status == 0, err
        return
    assert status == 2, (out, err)
    assert "Traceback" not in err and not out.strip()
    for f in _fill(fragments, files):
        assert f in err, f"{f!r} not in:\n{err}"


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "costgraph"
    found = str(script) if script.exists() else shutil.which("costgraph")
    return [found] if found else [sys.executable, "-m", "costgraph.cli"]


END_TO_END = {
    "syntax": (["derive", "{syntax}"], ["{syntax}:4:1: syntax error", "expected ')' or ','", "^"]),
    "semantic": (["derive", "{semantic}"], ["{semantic}:6:7: error: unknown operator or block 'lineer'"]),
    "binary": (["derive", "{binary}"], ["{binary}:1:1: error"]),
    "bad-set": (["derive", "gpt", "--set", "h=abc"], ["cannot read --set 'h=abc'"]),
    "directory": (["derive", "{dir}"], ["is a directory"]),
}


# every error kind as a process (`python -m costgraph.cli`), and the console script once: both entry points
# reach the same costgraph.cli code, so the script's other four cases (about 2 s of CPU each) added no coverage
@pytest.mark.parametrize("runner, args, fragments",
                         [("module", *case) for case in END_TO_END.values()] + [("script", *END_TO_END["syntax"])],
                         ids=[f"module-{k}" for k in END_TO_END] + ["script-syntax"])
def test_cli_end_to_end(runner, args, fragments, files):
    cmd = [sys.executable, "-m", "costgraph.cli"] if runner == "module" else _console_script()
    r = subprocess.run([*cmd, *_fill(args, files)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    for f in _fill(fragments, files):
        assert f in r.stderr, f"{f!r} not in:\n{r.stderr}"


def test_cli_absurdly_large_values_still_print(capsys):
    big = "9" * 100   # the most digits a number may have
    args = [f"{d}={big}" for d in ("h", "l", "V", "s", "s_max", "b")] + ["a=3"]
    assert main(["derive", "gpt", "--set", *args]) == 0
    out = capsys.readouterr().out
    assert "(about 10^" in out          # too large for a float: the order of magnitude


def test_cli_config_json_errors_exit_2(tmp_path, capsys):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", ')
    assert main(["derive", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:1:25: error: invalid JSON" in err and "Traceback" not in err


@pytest.mark.parametrize("text, line, column", [
    # `dim not "w"` was accepted, then the file failed where `not` was used ("an expression after 'not'")
    (M.replace("  dim h\n", '  dim h\n  dim not "w"\n') + "  input y[b, not]\n  return x\n}\n", 5, 7),
    (M.replace("  dim h\n", "  dim h\n  dim and\n") + "  return x\n}\n", 5, 3),
    (M + "  or = gelu(x)\n  return or\n}\n", 6, 3),
    ("block f(x, and) {\n  return x\n}\n" + M + "  return f(x, b)\n}\n", 1, 12),
])
def test_operator_words_are_refused_as_names_where_declared(text, line, column):
    """not, and, or are refused as names at the declaration, as true and false are (issue 30 item 3)."""
    err = error_of(text)
    check(err, ["is an operator word (not, and, or) and cannot", "choose another name"], line, column)


# --- refusals on the new families carry a hint (issue 19 trial) ------------------------------------------------------

def run(argv, capsys):
    status = main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize("argv, hint", [
    (["derive", "vit", "--config", "vit-base-patch16-224", "--set", "image=0"], "--set image=1"),
    (["sweep", "llama", "--config", "llama-3-8b", "--over", "h=64:128:+64", "--max-rows", "-1"], "hint: "),
])
def test_refusals_carry_a_hint(capsys, argv, hint):
    status, _, err = run(argv, capsys)
    assert status == 2 and hint in err and "hint: " in err


# --- --batch 0 and --gpus 0 named with their flag (issue 20 trial) ---------------------------------------------------

def test_batch_zero_is_named_with_its_flag(capsys):
    # `infer/fit --serve --batch 0` was refused at the model file (llama.cg:71: "a dimension of tensor
    # 'tokens' is b = 0"), and a bad --gpus/--tp hinted "--set --gpus=N", which is no command.
    assert main(["infer", "llama", "--config", "llama-3-8b", "--prompt", "5", "--generate", "5", "--batch", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: '--batch' must be a positive whole number, got 0 (int)") and ".cg" not in err
    assert main(["fit", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--serve", "--prompt", "5",
                 "--generate", "5", "--batch", "-3"]) == 2
    assert "'--batch' must be a positive whole number, got -3" in capsys.readouterr().err
    assert main(["fit", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--gpus", "0"]) == 2
    assert "hint: give --gpus a whole number above 0 (e.g. --gpus 2; in Python gpus=2)" in capsys.readouterr().err


# --- statements after a return are an error at the first of them (new-user trial) ------------------------------------

def _err(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err


# statements after a return are an error at the first of them, not silently dropped
@pytest.mark.parametrize("where, text, line", [
    ("model", 'model m {\n  dim b "batch"\n  dim s "tokens"\n  dim h "width"\n  input x[b, s, h]\n'
              '  return x\n  y = linear(x, h)\n}\n', 7),
    ("block", 'block f(x[B, S, H]) {\n  return gelu(x)\n  y = linear(x, H)\n}\n'
              'model m {\n  dim b "batch"\n  dim s "tokens"\n  dim h "width"\n  input x[b, s, h]\n'
              '  return f(x)\n}\n', 3),
])
def test_statements_after_return_are_unreachable(tmp_path, capsys, where, text, line):
    path = tmp_path / "m.cg"
    path.write_text(text)
    err = _err(capsys, ["derive", str(path), "--set", "b=1", "s=2", "h=3"])
    assert err == (f"{path}:{line}:3: error: unreachable: statements after return\n"
                   "      y = linear(x, " + ("h" if where == "model" else "H") + ")\n      ^\n"
                   "hint: a block or model ends at its return; move the statements before it, or delete them\n")


# --- impossible sizes are errors (a new user's README run) -----------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["deepseek_v3", "--config", "deepseek-v3", "--set", "k_d=70"], "repeat count of 'moe_layers' is -k_d + l = -9"),
    (["mixtral", "--config", "mixtral-8x7b", "--set", "k=10"], "has 8 copies but 10 active"),
    (["llama", "--config", "llama-2-7b", "--set", "kv=5"], "a/kv = 32/5"),
    (["gemma2", "--config", "gemma-2-9b", "--set", "l=41"], "l/2 = 41/2"),
])
def test_impossible_sizes_are_errors(args, message, capsys):
    assert main(["derive", *args]) == 2
    assert message in capsys.readouterr().err
