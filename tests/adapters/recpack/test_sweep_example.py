"""The RecPack sweep example (examples/sweep_recpack.py) at small size.

Needs RecPack (legacy environment); the modern nox session excludes this folder explicitly.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from recpack_ope.inference.significance import tied_with_best
from recpack_ope.inference.systems import SystemScores

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sweep_recpack.py"

pytestmark = pytest.mark.usefixtures("quiet_recpack")


def test_recpack_sweep_picks_by_its_target_and_fits_propensities_on_training(capsys):
    out = runpy.run_path(str(EXAMPLE))["main"](["--users", "150"])
    printed = capsys.readouterr().out
    assert "fitted on the training interactions only" in printed
    results, target = out["results"], out["target"]
    assert len(results) == 9 and set(target.index) == set(results)
    # The pick is the argmax of the per-user means of the target, the values it reports.
    means = {m: float(np.mean(r.per_user)) for m, r in results.items()}
    assert out["pick"] == max(means, key=means.get) == target["value"].idxmax()
    assert out["pick_plain"] == out["plain"].idxmax()
    # Ties recomputed from the same per-user values, outside the adapter's summary.
    per_user = {m: dict(zip(r.user_ids, r.per_user, strict=True)) for m, r in results.items()}
    ties = tied_with_best(SystemScores.from_user_values(per_user, "IPS-DCG@10"))
    assert set(out["tied"]) == set(ties.tied) and ties.best == out["pick"]
    # Propensities saw the training interactions only: their counts are the training matrix's
    # per-item users, not those of training and test together.
    train = out["train"].tocsc()
    np.testing.assert_array_equal(out["propensity"].counts_, np.diff(train.indptr))
    both = np.diff((out["train"] + out["test"]).tocsc().indptr)
    assert not np.array_equal(out["propensity"].counts_, both)
    assert out["runner_up"] == target.index[1]
