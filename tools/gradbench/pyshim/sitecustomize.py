"""Lets GradBench's evals (written for pydantic 2) run with Debian 12's pydantic 1.

Imported automatically when this directory is on PYTHONPATH (tools/gradbench/run.py puts
it there): adds BaseModel.model_validate (pydantic 2's name for parse_obj) when missing.
"""

try:
    import pydantic

    if not hasattr(pydantic.BaseModel, "model_validate"):
        pydantic.BaseModel.model_validate = classmethod(lambda cls, obj: cls.parse_obj(obj))
except ImportError:
    pass
