"""from_torch refuses what it cannot reproduce, instead of copying the rest and differing."""

import pytest
from torch import nn

from attnlab.nn import mha_from_torch


@pytest.mark.parametrize("kw", [{"add_zero_attn": True}, {"add_bias_kv": True}])
def test_extra_key_value_rows_are_refused(kw):
    theirs = nn.MultiheadAttention(16, 4, batch_first=True, **kw)
    with pytest.raises(ValueError, match=rf"\bnn\.MultiheadAttention\b.*\b{next(iter(kw))}=True\b"):
        mha_from_torch(theirs)
    assert mha_from_torch(nn.MultiheadAttention(16, 4, batch_first=True)).num_heads == 4
