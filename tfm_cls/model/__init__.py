"""From-scratch Transformer building blocks and the models built from them (see docs/model.md)."""

from tfm_cls.model.attention import MultiheadAttention, attention, causal_mask, merge_masks
from tfm_cls.model.bag import BagOfTermsClassifier
from tfm_cls.model.classifier import Pooler, TransformerClassifier, pool
from tfm_cls.model.decoder import TransformerDecoder, TransformerDecoderLayer
from tfm_cls.model.embeddings import LearnedPositionalEncoding, PositionalEncoding, TokenEmbedding
from tfm_cls.model.encoder import TransformerEncoder, TransformerEncoderLayer
from tfm_cls.model.seq2seq import Seq2SeqTransformer
from tfm_cls.model.transformer import Transformer

__all__ = [
    "BagOfTermsClassifier",
    "LearnedPositionalEncoding",
    "MultiheadAttention",
    "PositionalEncoding",
    "Pooler",
    "Seq2SeqTransformer",
    "TokenEmbedding",
    "Transformer",
    "TransformerClassifier",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "attention",
    "causal_mask",
    "merge_masks",
    "pool",
]
