"""Privacy accounting: guarantees and the pure functions behind them.

Nothing here imports TensorFlow; mechanisms live in `tfdptext.layers` and
report their guarantee through these functions.
"""

from tfdptext.privacy import categorical
from tfdptext.privacy import identification
from tfdptext.privacy import limit
from tfdptext.privacy import randomness
from tfdptext.privacy import word_statistics
from tfdptext.privacy.dropout import dropout_epsilon
from tfdptext.privacy.dropout import effective_rate as effective_dropout_rate
from tfdptext.privacy.dropout import with_dropout
from tfdptext.privacy.guarantee import Guarantee
from tfdptext.privacy.guarantee import UNITS
from tfdptext.privacy.categorical import code_guarantee
from tfdptext.privacy.categorical import label_guarantee
from tfdptext.privacy.laplace import laplace_guarantee
from tfdptext.privacy.laplace import laplace_scale
from tfdptext.privacy.laplace import per_coordinate_epsilon
from tfdptext.privacy.laplace import to_representation_level
from tfdptext.privacy.laplace import truncation_delta
from tfdptext.privacy.laplace import vector_epsilon
from tfdptext.privacy.limit import identification_bound
from tfdptext.privacy.limit import limit_report
from tfdptext.privacy.limit import per_text_epsilon
from tfdptext.privacy.limit import rr_limit
from tfdptext.privacy.metric import dchi_guarantee
from tfdptext.privacy.metric import expected_noise_norm
from tfdptext.privacy.metric import pair_delta
from tfdptext.privacy.metric import sequence_bound
from tfdptext.privacy.metric import sequence_distance
from tfdptext.privacy.metric import truncation_probability
from tfdptext.privacy.privacy_ratio import average_distance
from tfdptext.privacy.privacy_ratio import matched_epsilon
from tfdptext.privacy.privacy_ratio import max_distance
from tfdptext.privacy.privacy_ratio import privacy_ratio
from tfdptext.privacy.randomized_response import brr_text_guarantee
from tfdptext.privacy.randomized_response import flip_probability
from tfdptext.privacy.randomized_response import keep_probability
from tfdptext.privacy.randomized_response import rr_guarantee
