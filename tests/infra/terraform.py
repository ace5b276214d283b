"""infra/*.tf as data: parsed with python-hcl2 v7 (expressions come back as "${...}" strings),
plus an evaluator for the few expression forms the infra checks need, with stand-ins for what
only AWS knows (region, account, queue URL). An expression it does not know fails loudly:
teach it the new form rather than skipping the check."""

import functools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hcl2.api import load as parse_hcl

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
STAND_IN_REGION = "eu-west-1"
STAND_IN_ACCOUNT = "123456789012"

_WHOLE_EXPRESSION = re.compile(r"^\$\{(.*)\}$", re.DOTALL)
_INTERPOLATION = re.compile(r"\$\{([^{}]*)\}")
_FUNCTION = re.compile(r"^(tostring|join)\((.*)\)$", re.DOTALL)
_OPTIONAL_TO_STRING = re.compile(r'^(\S+) == null \? "" : tostring\((\S+)\)$')


def expression(value: Any) -> str | None:
    """The expression of a value that is one "${...}", or None (a literal or a template)."""
    if not isinstance(value, str) or value.count("${") != 1:
        return None
    match = _WHOLE_EXPRESSION.match(value)
    return match.group(1).strip() if match else None


class Terraform:
    def __init__(self, documents: Mapping[str, Mapping[str, Any]]) -> None:
        self.files = dict(documents)
        self.variables: dict[str, dict[str, Any]] = {}
        self.locals: dict[str, Any] = {}
        self.resources: dict[tuple[str, str], dict[str, Any]] = {}
        self.data: dict[tuple[str, str], dict[str, Any]] = {}
        for document in documents.values():
            for block in document.get("variable", []):
                self.variables.update(block)
            for block in document.get("locals", []):
                self.locals.update(block)
            for kind, target in (("resource", self.resources), ("data", self.data)):
                for block in document.get(kind, []):
                    for type_, named in block.items():
                        for name, body in named.items():
                            target[(type_, name)] = body

    def resource(self, type_: str, name: str) -> dict[str, Any]:
        return self.resources[(type_, name)]

    def resources_of(self, type_: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for (t, name), body in self.resources.items():
            if t == type_:
                yield name, body

    def policy_document(self, name: str) -> dict[str, Any]:
        return self.data[("aws_iam_policy_document", name)]

    def default(self, variable: str) -> Any:
        return self.variables[variable].get("default")

    def evaluate(self, value: Any) -> Any:
        """The value with every reference resolved (variables at their defaults)."""
        inner = expression(value)
        if inner is not None:
            return self._evaluate(inner)
        if isinstance(value, str) and "${" in value:  # a template: "${a}-${b}"
            return _INTERPOLATION.sub(lambda m: _to_string(self._evaluate(m.group(1))), value)
        return value

    def _evaluate(self, text: str) -> Any:
        text = text.strip()
        if text.startswith('"') and text.endswith('"'):
            return text[1:-1]
        if re.fullmatch(r"-?\d+(\.\d+)?", text):
            return float(text) if "." in text else int(text)
        if match := re.fullmatch(r"var\.(\w+)", text):
            return self.default(match.group(1))
        if match := re.fullmatch(r"local\.(\w+)", text):
            return self.evaluate(self.locals[match.group(1)])
        if match := _OPTIONAL_TO_STRING.match(text):
            value = self._evaluate(match.group(1))
            return "" if value is None else _to_string(value)
        if match := _FUNCTION.match(text):
            function, args = match.groups()
            if function == "tostring":
                return _to_string(self._evaluate(args))
            joined = re.fullmatch(r'"(.*?)",\s*(.+)', args, re.DOTALL)
            assert joined, f"join({args}): expected a literal separator"
            return joined.group(1).join(self._evaluate(joined.group(2)))
        if text == "data.aws_region.current.id":
            return STAND_IN_REGION
        if text == "aws_sqs_queue.hints.url":
            name = self.evaluate(self.resource("aws_sqs_queue", "hints")["name"])
            return f"https://sqs.{STAND_IN_REGION}.amazonaws.com/{STAND_IN_ACCOUNT}/{name}"
        if text == "aws_ecs_cluster.main.arn":
            name = self.evaluate(self.resource("aws_ecs_cluster", "main")["name"])
            return f"arn:aws:ecs:{STAND_IN_REGION}:{STAND_IN_ACCOUNT}:cluster/{name}"
        if text == "aws_ecs_service.worker.name":
            return self.evaluate(self.resource("aws_ecs_service", "worker")["name"])
        if match := re.fullmatch(r"aws_dynamodb_table\.(\w+)\.name", text):
            return self.evaluate(self.resource("aws_dynamodb_table", match.group(1))["name"])
        raise AssertionError(f"tests/infra/terraform.py cannot evaluate ${{{text}}}: teach it")


def _to_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@functools.cache
def load() -> Terraform:
    paths = sorted(INFRA.glob("*.tf"))
    assert paths, f"no .tf files in {INFRA}"
    documents = {}
    for path in paths:
        with path.open() as handle:
            documents[path.name] = parse_hcl(handle)
    return Terraform(documents)


def blocks(body: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    """Nested blocks of one kind (hcl2 gives a list, one entry per block), static and dynamic."""
    found = list(body.get(name, []))
    for dynamic in body.get("dynamic", []):
        for label, spec in dynamic.items():
            if label == name:
                found.extend(spec.get("content", []))
    return found
