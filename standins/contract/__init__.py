"""Langfuse's API contract for tests: our table of the operations the stand-in serves, with the ``langfuse``
package's models for the shapes it carries and ours for the legacy ones (nothing read from outside the
repository)."""

from functools import cache

from standins.contract.contract import Contract
from standins.contract.operations import OPERATIONS, ContractViolation, Operation


@cache
def get_contract() -> Contract:
    """The contract, built once per test session."""
    return Contract()


__all__ = ["OPERATIONS", "Contract", "ContractViolation", "Operation", "get_contract"]
