"""Triggers: long waits in the triggerer, one module per thing waited on."""
