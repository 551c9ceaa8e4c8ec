"""Label and field selectors as the Kubernetes API server parses and evaluates them.

The local cluster answers ``?labelSelector=`` and ``?fieldSelector=`` (list and watch) and evaluates
``metav1.LabelSelector`` objects found in specs (Jobs, JobSets, PodDisruptionBudgets...). Clients
and ``kubectl`` pass selector strings through verbatim, so the parser here follows
``k8s.io/apimachinery/pkg/labels`` and ``.../fields`` closely: a selector that a real API server
refuses is refused here too, with the same kind of message, so code tested against the local
cluster does not break on a real one.

Everything in this module is pure: parse once, then call ``.matches`` as often as needed.

Label selector grammar (``parse_label_selector``)::

    selector    := "" | requirement ("," requirement)*
    requirement := ["!"] KEY
                 | KEY ("=" | "==" | "!=") [VALUE]
                 | KEY ("in" | "notin") "(" [VALUE ("," [VALUE])*] ")"
                 | KEY (">" | "<") INTEGER

Whitespace (space, tab, CR, LF) between tokens is ignored; ``k=`` means "k is the empty string";
keys must be qualified names (``[prefix/]name``) and values valid label values, as on a server.

Field selector grammar (``parse_field_selector``)::

    selector := "" | term ("," term)*
    term     := FIELD ("=" | "==" | "!=") VALUE   (",", "=" and "\\" in VALUE are escaped with "\\")

Unlike label selectors, field selectors are not whitespace tolerant: ``metadata.name = x`` names
the field ``"metadata.name "``, which the server then refuses as unsupported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Collection, Iterable, Mapping

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "label_selector_from_dict",
    "label_selector_from_set",
    "parse_field_selector",
    "parse_label_selector",
    "supported_field_labels",
]


class SelectorError(ValueError):
    """A selector the API server would refuse; the local server answers 400 BadRequest with it."""


class Operator(str, Enum):
    """Label requirement operators; the values are apimachinery's ``selection.Operator`` strings."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


# The server lists these, in this order, when it meets something that is not an operator.
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"

# --- validation of keys and values (k8s.io/apimachinery/pkg/util/validation) ---------------------

_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_INT64 = re.compile(r"[+-]?[0-9]+")

_QUALIFIED_NAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
    "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _label_key_problems(key: str) -> list[str]:
    """Why ``key`` is not a qualified name (``[DNS-subdomain "/"] name``), as the server words it."""
    parts = key.split("/")
    problems: list[str] = []
    if len(parts) > 2:
        return [
            f"a qualified name {_QUALIFIED_NAME_RULE} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                problems.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
                problems.append(f"prefix part {_SUBDOMAIN_RULE}")
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        problems.append(f"name part {_QUALIFIED_NAME_RULE}")
    return problems


def _label_value_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _LABEL_VALUE.fullmatch(value):
        problems.append(_LABEL_VALUE_RULE)
    return problems


def _invalid(path: str, value: object, detail: str) -> str:
    """``field.Invalid(...).Error()``: ``path: Invalid value: "value": detail``."""
    if isinstance(value, str):
        shown = f'"{value}"'
    else:
        shown = repr(list(value) if isinstance(value, tuple) else value)
    return f"{path}: Invalid value: {shown}: {detail}"


def _aggregate(errors: list[str]) -> str:
    """How apimachinery prints an aggregate of field errors: one bare, several in brackets."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def _is_int64(text: str) -> bool:
    return bool(_INT64.fullmatch(text)) and -(2**63) <= int(text) < 2**63


# --- label requirements -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    """One label requirement; ``values`` are sorted and de-duplicated, as the server keeps them."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes semantics: ``!=`` and ``notin`` also match objects without the key."""
        op = self.operator
        present = self.key in labels
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return present
        if op is Operator.DOES_NOT_EXIST:
            return not present
        # gt / lt: the label must hold an integer, otherwise the object does not match.
        if not present or len(self.values) != 1 or not _is_int64(labels[self.key]):
            return False
        have, want = int(labels[self.key]), int(self.values[0])
        return have > want if op is Operator.GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        if op in (Operator.IN, Operator.NOT_IN):
            return f"{self.key} {op.value} ({','.join(self.values)})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{self.values[0]}"


def _requirement(key: str, op: Operator, values: Iterable[str]) -> Requirement:
    """``labels.NewRequirement``: validate the key, the values, and the operator's arity."""
    vals = tuple(sorted(set(values)))
    errors: list[str] = []
    problems = _label_key_problems(key)
    if problems:
        errors.append(_invalid("key", key, "; ".join(problems)))
    if op in (Operator.IN, Operator.NOT_IN) and not vals:
        errors.append(_invalid("values", vals, "for 'in', 'notin' operators, values set can't be empty"))
    elif op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS) and len(vals) != 1:
        errors.append(_invalid("values", vals, "exact-match compatibility requires one single value"))
    elif op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and vals:
        errors.append(_invalid("values", vals, "values set must be empty for exists and does not exist"))
    elif op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        if len(vals) != 1:
            errors.append(_invalid("values", vals, "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, value in enumerate(vals):
            if not _is_int64(value):
                errors.append(
                    _invalid(f"values[{i}]", value, "for 'Gt', 'Lt' operators, the value must be an integer")
                )
    for i, value in enumerate(vals):
        problems = _label_value_problems(value)
        if problems:
            errors.append(_invalid(f"values[{i}][{key}]", value, "; ".join(problems)))
    if errors:
        raise SelectorError(_aggregate(errors))
    return Requirement(key, op, vals)


@dataclass(frozen=True)
class LabelSelector:
    """AND of requirements. No requirements matches everything; ``matches_nothing`` (a null
    ``metav1.LabelSelector``) matches no object at all."""

    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = False

    @property
    def matches_everything(self) -> bool:
        return not self.requirements and not self.matches_nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.matches_nothing:
            return False
        present = labels or {}
        return all(r.matches(present) for r in self.requirements)

    def __str__(self) -> str:
        """The canonical ``labelSelector`` string (requirements sorted by key)."""
        return ",".join(str(r) for r in self.requirements)


def _sorted_selector(requirements: Iterable[Requirement]) -> LabelSelector:
    # The server sorts requirements by key (stable), which makes str() canonical.
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


# --- label selector parser ----------------------------------------------------------------------------

_IDENT, _IN, _NOT_IN, _BANG, _EQ, _DEQ, _NEQ, _GT, _LT, _LPAREN, _RPAREN, _COMMA, _END = range(13)
_SYMBOLS = {
    "(": _LPAREN,
    ")": _RPAREN,
    ",": _COMMA,
    "!": _BANG,
    "=": _EQ,
    "==": _DEQ,
    "!=": _NEQ,
    ">": _GT,
    "<": _LT,
}
_SPECIAL = frozenset("=!(),<>")
_WHITESPACE = frozenset(" \t\r\n")


def _lex(text: str) -> list[tuple[int, str]]:
    """Tokens as apimachinery's lexer cuts them: the longest symbol wins (``!=``, ``==``)."""
    tokens: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i == n:
            tokens.append((_END, ""))
            return tokens
        if text[i] in _SPECIAL:
            symbol = text[i : i + 2] if text[i : i + 2] in _SYMBOLS else text[i]
            tokens.append((_SYMBOLS[symbol], symbol))
            i += len(symbol)
            continue
        start = i
        while i < n and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
            i += 1
        word = text[start:i]
        tokens.append(({"in": _IN, "notin": _NOT_IN}.get(word, _IDENT), word))


class _LabelParser:
    """Recursive descent over the token list. Where a value may appear, ``in`` and ``notin`` are
    ordinary identifiers (``app in (in)`` is valid), exactly as in apimachinery."""

    def __init__(self, text: str):
        self._tokens = _lex(text)
        self._pos = 0

    def _peek(self, values: bool = True) -> tuple[int, str]:
        tok, lit = self._tokens[self._pos]
        return (_IDENT, lit) if values and tok in (_IN, _NOT_IN) else (tok, lit)

    def _next(self, values: bool = True) -> tuple[int, str]:
        token = self._peek(values)
        self._pos += 1
        return token

    def parse(self) -> LabelSelector:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self._peek()
            if tok == _END:
                return _sorted_selector(requirements)
            if tok not in (_IDENT, _BANG):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except SelectorError as error:
                raise SelectorError(f"unable to parse requirement: {error}") from None
            tok, lit = self._next()
            if tok == _END:
                return _sorted_selector(requirements)
            if tok != _COMMA:
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self._peek()
            if tok not in (_IDENT, _BANG):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        negated = False
        tok, lit = self._next()
        if tok == _BANG:
            negated = True
            tok, lit = self._next()
        if tok != _IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key = lit
        problems = _label_key_problems(key)
        if problems:
            raise SelectorError(_invalid("key", key, "; ".join(problems)))
        if negated:
            # "!a=b" reads as "!a"; the caller then refuses "=" where it expects "," or the end.
            return _requirement(key, Operator.DOES_NOT_EXIST, ())
        if self._peek()[0] in (_END, _COMMA):
            return _requirement(key, Operator.EXISTS, ())
        tok, lit = self._next(values=False)
        operators = {
            _IN: Operator.IN,
            _NOT_IN: Operator.NOT_IN,
            _EQ: Operator.EQUALS,
            _DEQ: Operator.DOUBLE_EQUALS,
            _NEQ: Operator.NOT_EQUALS,
            _GT: Operator.GREATER_THAN,
            _LT: Operator.LESS_THAN,
        }
        if tok not in operators:
            raise SelectorError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        op = operators[tok]
        values = self._set_values() if op in (Operator.IN, Operator.NOT_IN) else self._exact_value()
        return _requirement(key, op, values)

    def _set_values(self) -> set[str]:
        tok, lit = self._next()
        if tok != _LPAREN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self._peek()
        if tok == _RPAREN:  # "()" is the set holding the empty string
            self._next()
            return {""}
        if tok not in (_IDENT, _COMMA):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self._identifier_list()
        if self._next()[0] != _RPAREN:
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def _identifier_list(self) -> set[str]:
        """Comma separated, possibly empty values: ``(a,,b)`` and ``(,a)`` include ``""``."""
        values: set[str] = set()
        while True:
            tok, lit = self._next()
            if tok == _IDENT:
                values.add(lit)
                after, after_lit = self._peek()
                if after == _RPAREN:
                    return values
                if after != _COMMA:
                    raise SelectorError(f"found '{after_lit}', expected: ',' or ')'")
            elif tok == _COMMA:
                if not values:
                    values.add("")
                after = self._peek()[0]
                if after == _RPAREN:
                    values.add("")
                    return values
                if after == _COMMA:
                    values.add("")
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        if self._peek()[0] in (_END, _COMMA):  # "k=" compares with the empty string
            return {""}
        tok, lit = self._next()
        if tok != _IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        return {lit}


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a ``labelSelector`` query parameter; ``""`` (or ``None``) selects everything."""
    return _LabelParser(text or "").parse()


_MATCH_EXPRESSION_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def label_selector_from_dict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` (``matchLabels`` AND ``matchExpressions``) as a selector.

    API convention, which the API server's ``LabelSelectorAsSelector`` implements: an empty
    selector (``{}``) matches every object, a null one (``None``) matches none.
    """
    if selector is None:
        return LabelSelector(matches_nothing=True)
    if not isinstance(selector, Mapping):
        raise SelectorError(
            f"a label selector must be an object with matchLabels/matchExpressions, got {selector!r}"
        )
    requirements: list[Requirement] = []
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise SelectorError(f"matchLabels must be a map of label key to value, got {match_labels!r}")
    for key, value in match_labels.items():
        if not isinstance(value, str):
            raise SelectorError(f"matchLabels[{key!r}] must be a string, got {value!r}")
        requirements.append(_requirement(str(key), Operator.EQUALS, (value,)))
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError(f"matchExpressions must be a list, got {expressions!r}")
    for expression in expressions:
        if not isinstance(expression, Mapping):
            raise SelectorError(f"each matchExpressions entry must be an object, got {expression!r}")
        operator = expression.get("operator")
        if operator not in _MATCH_EXPRESSION_OPERATORS:
            raise SelectorError(
                f'"{operator}" is not a valid label selector operator (use In, NotIn, Exists or DoesNotExist)'
            )
        values = expression.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError(f"matchExpressions values must be a list of strings, got {values!r}")
        key = str(expression.get("key") or "")
        requirements.append(_requirement(key, _MATCH_EXPRESSION_OPERATORS[operator], values))
    return _sorted_selector(requirements)


def label_selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """Equality on every pair, like ``labels.SelectorFromSet`` for a Service's ``spec.selector``.

    Unlike ``label_selector_from_dict``, a missing or empty set matches everything; deciding that
    a Service without a selector gets no endpoints is the caller's business, as upstream.
    """
    return _sorted_selector(_requirement(k, Operator.EQUALS, (v,)) for k, v in (labels or {}).items())


# --- field selectors ------------------------------------------------------------------------------


def _first_pod_ip(obj: Mapping[str, Any]) -> Any:
    status = obj.get("status") or {}
    ips = status.get("podIPs") or []
    if ips and isinstance(ips[0], Mapping):
        return ips[0].get("ip", "")
    return status.get("podIP", "")


def _event_source(obj: Mapping[str, Any]) -> Any:
    return ((obj.get("source") or {}).get("component")) or obj.get("reportingController") or ""


def _path(*keys: str, default: str = "") -> Callable[[Mapping[str, Any]], Any]:
    def read(obj: Mapping[str, Any]) -> Any:
        node: Any = obj
        for key in keys:
            if not isinstance(node, Mapping) or key not in node or node[key] is None:
                return default
            node = node[key]
        return node

    return read


# Field labels whose value is not simply the value at their own dotted path, and typed fields
# whose zero value the server reports ("false", "0") instead of "".
_FIELD_READERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "status.podIP": _first_pod_ip,  # the server reads status.podIPs[0].ip
    "spec.hostNetwork": _path("spec", "hostNetwork", default="false"),
    "spec.unschedulable": _path("spec", "unschedulable", default="false"),
    "status.successful": _path("status", "succeeded", default="0"),  # Job: note the name
    "status.replicas": _path("status", "replicas", default="0"),
    "source": _event_source,
    "reportingComponent": _path("reportingController"),
}


def _field_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return ""  # not a selectable scalar; the server never exposes such fields
    return str(value)


def _field_value(obj: Mapping[str, Any], field: str) -> str:
    reader = _FIELD_READERS.get(field) or _path(*field.split("."))
    return _field_text(reader(obj))


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


@dataclass(frozen=True)
class FieldRequirement:
    """``field == value`` (``negated=False``) or ``field != value``."""

    field: str
    value: str
    negated: bool = False

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (_field_value(obj, self.field) == self.value) != self.negated

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.negated else '='}{_escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """AND of field requirements; no requirements matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(r.field for r in self.requirements)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Missing fields compare as ``""`` (``"false"``/``"0"`` for the typed ones, see above)."""
        return all(r.matches(obj) for r in self.requirements)

    def require_supported(self, supported: Collection[str]) -> None:
        """Refuse field labels the kind does not index, with the server's message (answer 400)."""
        for requirement in self.requirements:
            if requirement.field not in supported:
                raise SelectorError(f"field label not supported: {requirement.field}")

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _split_unescaped_commas(text: str) -> list[str]:
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _unescape_field_value(value: str) -> str:
    out, escaped = [], False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(
                f"invalid field selector: unescaped character in value: {ch!r} (escape it as \\{ch})"
            )
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a ``fieldSelector`` query parameter; ``""`` (or ``None``) selects everything.

    Terms split on unescaped commas; each term splits at its first ``!=``, ``==`` or ``=``.
    """
    requirements: list[FieldRequirement] = []
    selector = text or ""
    for term in sorted(_split_unescaped_commas(selector)) if selector else ():
        if not term:
            continue
        for i in range(len(term)):
            op = next((o for o in ("!=", "==", "=") if term.startswith(o, i)), None)
            if op:
                field, value = term[:i], term[i + len(op) :]
                requirements.append(FieldRequirement(field, _unescape_field_value(value), negated=op == "!="))
                break
        else:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{term}'")
    return FieldSelector(tuple(requirements))


_OBJECT_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})

# (group, kind) -> field labels the API server accepts, from its field label conversion functions.
_SUPPORTED_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "Pod"): _OBJECT_META_FIELDS
    | {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
    ("", "Event"): _OBJECT_META_FIELDS
    | {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    ("", "Node"): frozenset({"metadata.name", "spec.unschedulable"}),
    ("", "Namespace"): frozenset({"metadata.name", "status.phase"}),
    ("", "Secret"): _OBJECT_META_FIELDS | {"type"},
    ("", "ReplicationController"): _OBJECT_META_FIELDS | {"status.replicas"},
    ("apps", "ReplicaSet"): _OBJECT_META_FIELDS | {"status.replicas"},
    ("batch", "Job"): _OBJECT_META_FIELDS | {"status.successful"},
}


def supported_field_labels(group: str, kind: str, *, namespaced: bool = True) -> frozenset[str]:
    """The field labels a real API server accepts in ``fieldSelector`` for this kind.

    Kinds not listed (every custom resource, most built-ins) support ``metadata.name`` and, when
    namespaced, ``metadata.namespace`` only. CRD ``selectableFields`` are not modelled.
    """
    known = _SUPPORTED_FIELDS.get((group, kind))
    if known is not None:
        return known
    return _OBJECT_META_FIELDS if namespaced else frozenset({"metadata.name"})
