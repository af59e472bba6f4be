"""``dynnets.utils``: torch's ``torch.utils`` names; :mod:`.data` loads datasets in minibatches."""
from . import data

__all__ = ["data"]
