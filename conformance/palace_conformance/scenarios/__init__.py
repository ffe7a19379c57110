"""Scenario fixtures (the JSON under fixtures/scenarios): loading, validating and listing the language-neutral JSON files."""
