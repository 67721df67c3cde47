"""Langfuse's API contract for tests: requests against the OpenAPI file, answers against the package."""

from functools import cache

from standins.contract.contract import PACKAGE_MODELS, Contract
from standins.contract.openapi import ContractViolation, locate_openapi


@cache
def get_contract() -> Contract:
    """The contract, loaded once per test session."""
    return Contract()


__all__ = ["PACKAGE_MODELS", "Contract", "ContractViolation", "get_contract", "locate_openapi"]
