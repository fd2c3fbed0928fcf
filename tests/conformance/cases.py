"""The whole conformance table: every family's cases, in one list, for parametrization."""
from . import (
               programs_append_only,
               programs_arith,
               programs_builtins,
               programs_classes,
               programs_contexts,
               programs_control,
               programs_dict_subclasses,
               programs_exceptions,
               programs_generator_protocol,
               programs_indexing,
               programs_modules,
               programs_objects,
               programs_ops,
               programs_outside_effects,
               programs_python,
               programs_reductions,
               programs_state,
               programs_stdlib,
               programs_views,
)

FAMILIES = (programs_arith, programs_views, programs_reductions, programs_indexing, programs_modules,
            programs_python, programs_state, programs_ops,
            # frontend breadth (issue 3)
            programs_control, programs_exceptions, programs_objects, programs_outside_effects, programs_builtins,
            programs_generator_protocol, programs_append_only, programs_dict_subclasses,
            programs_stdlib, programs_classes, programs_contexts)

ALL_CASES = [case for family in FAMILIES for case in family.T.cases]
CASE_IDS = [case.name for case in ALL_CASES]
