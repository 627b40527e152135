"""Token policies: TinyAgent and its word tokenizer, Hugging Face causal LMs, and the TokenPolicy seam between them.

tinyagent (the model, one file), tokenizer (BugFixEnv's words), policy (TokenPolicy and its
adapters), hf (loading and scoring HF models), hf_decode (lockstep decoders), default_lm (the
embedded tiny GPT-2 of ``pglab train-lm``). transformers is imported only where it is used.
"""

from pglab.models.policy import HFPolicy, TinyAgentPolicy, TokenPolicy, as_policy
from pglab.models.tinyagent import KVCache, TinyAgent, TinyConfig
from pglab.models.tokenizer import Tokenizer, build_tokenizer

__all__ = ["HFPolicy", "KVCache", "TinyAgent", "TinyAgentPolicy", "TinyConfig", "TokenPolicy", "Tokenizer",
           "as_policy", "build_tokenizer"]
