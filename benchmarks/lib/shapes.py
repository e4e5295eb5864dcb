"""Model shapes the fine-tuning and serving benchmarks run at."""

SHAPES = {
    "base": dict(hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                  intermediate_size=1024),
    # all-MiniLM-L6-v2's, the real pre-trained weights reachable here.
    "minilm": dict(hidden_size=384, num_hidden_layers=6,
                   num_attention_heads=12, intermediate_size=1536),
}
