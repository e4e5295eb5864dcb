"""WordPiece tokenization with the original release's API and output."""

from tokenization.text import convert_to_unicode
from tokenization.text import printable_text
from tokenization.text import whitespace_tokenize
from tokenization.tokenizers import BasicTokenizer
from tokenization.tokenizers import convert_by_vocab
from tokenization.tokenizers import FullTokenizer
from tokenization.tokenizers import load_vocab
from tokenization.tokenizers import validate_case_matches_checkpoint
from tokenization.tokenizers import VocabError
from tokenization.tokenizers import WordpieceTokenizer
from tokenization.graph import GraphTokenizer
from tokenization.preprocessing import BertPreprocessor
from tokenization.preprocessing import pack_inputs
from tokenization.tokenizers import check_vocab_tokens
from tokenization.tokenizers import read_vocab_tokens
