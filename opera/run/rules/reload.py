"""``reload``: the converted model serialized and read back must give the outputs of the model
that was never written (OpenVINO IR ``save_model``/``read_model``; TVM ``export_library`` and
``load_module``). A target without a serialized form says so (``not-applicable``)."""

from __future__ import annotations

from opera.run.rules import RULES, VariantRule


@RULES.register("reload")
class ReloadRule(VariantRule):
    name = "reload"
    what = "the saved and reloaded model"
