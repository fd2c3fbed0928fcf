"""The whole conformance table: every family's cases, in one list, for parametrization."""
from . import (
               programs_arith,
               programs_builtins2,
               programs_control2,
               programs_dictsub3,
               programs_effects2,
               programs_effects3,
               programs_exceptions2,
               programs_generators3,
               programs_indexing,
               programs_modules,
               programs_objects2,
               programs_ops,
               programs_python,
               programs_reductions,
               programs_state,
               programs_views,
)

FAMILIES = (programs_arith, programs_views, programs_reductions, programs_indexing, programs_modules,
            programs_python, programs_state, programs_ops,
            # frontend breadth (issue 3)
            programs_control2, programs_exceptions2, programs_objects2, programs_effects2, programs_builtins2,
            programs_generators3, programs_effects3, programs_dictsub3)

ALL_CASES = [case for family in FAMILIES for case in family.T.cases]
CASE_IDS = [case.name for case in ALL_CASES]
