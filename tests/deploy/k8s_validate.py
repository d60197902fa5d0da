#!/usr/bin/env python3
"""Validates Kubernetes objects strictly against the Kubernetes API's own OpenAPI schemas.

Reads a multi-document YAML stream on stdin (`kubectl kustomize`'s output) and checks each object
with the kubernetes-validate package (scripts/venv.sh installs it) at its newest Kubernetes
version, strict: an unknown field, a wrong type, a missing required field or an apiVersion/kind
that has no schema (an unknown kind) fails. Prints one line per object; exits 1 if any fails.
"""
import sys

import kubernetes_validate
import yaml


def check(doc: dict, version: str) -> str:
    """Returns '' when doc validates, else the reason."""
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return f"no schema for {doc.get('apiVersion')} {doc.get('kind')} (unknown kind)"
    except kubernetes_validate.ValidationError as error:
        path = ".".join(str(p) for p in error.path) or "(top)"
        return f"{path}: {error.message}"
    return ""


def main() -> int:
    version = kubernetes_validate.latest_version()
    docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
    failed = 0
    for doc in docs:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')} ({doc.get('apiVersion')})"
        reason = check(doc, version)
        print(f"FAIL {name}: {reason}" if reason else f"ok   {name}")
        failed += bool(reason)
    if not docs:
        print("FAIL no objects on stdin")
        failed += 1
    print(f"k8s_validate: {len(docs)} objects against Kubernetes {version}, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
