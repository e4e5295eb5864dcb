"""BERT model: config, Keras layers, BertModel, heads, task models,
checkpoint I/O."""

from modeling.bert_model import BertModel
from modeling.checkpoint import CheckpointError
from modeling.checkpoint import DamagedCheckpointError
from modeling.checkpoint import dropout_state_variables
from modeling.checkpoint import first_intact
from modeling.checkpoint import head_variable_names
from modeling.checkpoint import load_checkpoint
from modeling.checkpoint import open_checkpoint
from modeling.checkpoint import read_tensors
from modeling.checkpoint import resolve_checkpoint_path
from modeling.checkpoint import save_checkpoint
from modeling.checkpoint import save_variables
from modeling.checkpoint import unmapped_variables
from modeling.checkpoint import variable_map
from modeling.classifier import BertClassifier
from modeling.config import BertConfig
from modeling.config import ConfigError
from modeling.heads import ClassifierHead
from modeling.heads import FeatureTaggerHead
from modeling.heads import MaskedLMHead
from modeling.heads import MultipleChoiceHead
from modeling.heads import NextSentenceHead
from modeling.heads import SquadHead
from modeling.heads import TokenClassifierHead
from modeling.layers import gelu
from modeling.layers import gelu_exact
from modeling.layers import get_activation
from modeling.multiple_choice import BertMultipleChoice
from modeling.options import ComputeOptions
from modeling.pretrainer import BertPretrainer
from modeling.squad_model import BertSquadModel
from modeling.task_model import BertTaskModel
from modeling.token_classifier import BertFeatureTagger
from modeling.token_classifier import BertTokenClassifier
