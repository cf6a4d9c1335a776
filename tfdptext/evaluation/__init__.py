"""Evaluation: utility, attackers, membership inference, fairness and
plausible deniability."""

from tfdptext.evaluation.attacker import KINDS as ATTACKER_KINDS
from tfdptext.evaluation.attacker import train_attacker
from tfdptext.evaluation.deniability import changed_share
from tfdptext.evaluation.deniability import plausible_deniability
from tfdptext.evaluation.fairness import accuracy_gap
from tfdptext.evaluation.fairness import gap_change_test
from tfdptext.evaluation.fairness import subgroup_accuracy
from tfdptext.evaluation.membership import ATTACKS as MEMBERSHIP_ATTACKS
from tfdptext.evaluation.membership import membership_inference
from tfdptext.metrics import accuracy
from tfdptext.metrics import macro_f1
from tfdptext.metrics import majority_accuracy
from tfdptext.metrics import roc_auc
