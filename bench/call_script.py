"""What the user says in the scripted call of bench/call.py (and the benches that time its parts)."""

SCRIPT = [
    "Hello, can you hear me?",
    "What is the capital of France?",
    "Tell me something about the history of that city.",
    "How many people live there today?",
    "What should I visit first?",
    "Is the food expensive there?",
    "What is a good dish to try?",
    "How do I say thank you in French?",
    "What is the weather like in spring?",
    "Thanks, that is all for now.",
]
BARGE = "Sorry, let me stop you there."  # said over a reply, to cut it
