"""A fixed corpus of (input, output) pairs for the completeness and tone scorers' agreement
with the reference system: realistic agent exchanges written by hand, plus pairs generated
from them (words dropped, tenses changed, sentences merged, case and punctuation varied)."""

from __future__ import annotations

import random

# Realistic exchanges, one a line: a user's request | an agent's answer.
_REALISTIC_LINES = """
What is the capital of France? | Paris is the capital of France.
What is the capital of France? | Paris.
What is the capital of France? | Lyon is a large city in France.
Can you refund my last order? | I have refunded your last order; the money arrives in 3-5 business days.
Can you refund my last order? | I'm sorry, I can't refund orders older than 30 days.
Where is my package? It was supposed to arrive yesterday. | Your package was delayed at the depot and will arrive tomorrow.
Book a flight from Berlin to Tokyo for next Friday. | I booked a flight from Berlin to Tokyo departing next Friday at 10:40.
Book a flight from Berlin to Tokyo for next Friday. | There are no flights available on that day.
Summarize the quarterly report. | The report shows that sales increased by 20% in Q3 while costs stayed flat.
Why did the build fail? | The build failed because the tests timed out after 90 minutes.
How do I reset my password? | Click 'Forgot password' on the login page and follow the link we email you.
How do I reset my password? | You can reset it from the settings page.
Translate 'good morning' into Spanish. | Buenos días.
Who wrote Pride and Prejudice? | Jane Austen wrote Pride and Prejudice in 1813.
List three primary colors. | Red, blue and yellow are the three primary colors.
Is the store open on Sundays? | Yes, the store is open on Sundays from 10am to 4pm.
Is the store open on Sundays? | No, we're closed on Sundays.
What's the weather like in London today? | It's raining in London, with a high of 12°C.
Explain how photosynthesis works. | Plants use sunlight to turn water and carbon dioxide into glucose and oxygen.
Cancel my subscription, please. | Your subscription has been cancelled and you won't be charged again.
Cancel my subscription, please. | I couldn't find a subscription on your account.
What are the side effects of ibuprofen? | Common side effects include stomach pain, nausea and heartburn.
Recommend a good book about history. | Try 'Sapiens' by Yuval Noah Harari; it covers the history of humankind.
How many people live in Canada? | About 40 million people live in Canada.
Write a haiku about autumn. | Crimson leaves falling / whispering winds through bare trees / autumn says goodbye
Why is the sky blue? | Sunlight is scattered by the air, and blue light scatters the most.
Can I change the delivery address for order #4521? | Yes, I've updated the delivery address for order #4521.
What time does the meeting start? | The meeting starts at 3:30 pm in room B.
Compare Python and JavaScript for web development. | Python is popular for backends with Django, while JavaScript runs in every browser and on servers with Node.js.
The app keeps crashing when I open the camera. | Please update the app; version 2.4.1 fixes the camera crash.
I was charged twice for the same order! | I'm sorry about that. I refunded the duplicate charge just now.
Tell me a joke. | Why did the scarecrow win an award? Because he was outstanding in his field.
How do I cook rice? | Rinse the rice, boil it in twice as much water, then simmer for 15 minutes.
Which planet is the largest? | Jupiter is the largest planet in our solar system.
What does HTTP 404 mean? | It means the server couldn't find the requested page.
Give me the café's opening hours. | The café opens at 8:00 and closes at 18:00.
Schedule a call with Dr. Müller on Monday. | I scheduled a call with Dr. Müller for Monday at 9 am.
Is this product safe for children? | The product isn't recommended for children under three.
What were the main causes of World War I? | Militarism, alliances, imperialism and nationalism were the main causes.
My internet is not working. | I'm sorry to hear that. Have you tried restarting your router?
Send the invoice to the finance team. | I've sent the invoice to the finance team.
How long does shipping take to Australia? | Shipping to Australia usually takes 7 to 10 days.
Find me a vegetarian restaurant nearby. | Green Leaf, a vegetarian restaurant, is 300 meters away and has great reviews.
Can you help me write a cover letter? | Sure! Tell me about the job and your experience, and I'll draft one.
The service was terrible and the staff were rude. | We're very sorry about your experience; we have shared your feedback with the manager.
I love the new update, it's amazing! | Thank you! We're thrilled that you enjoy it.
Delete all my data. | Your account and all associated data will be deleted within 30 days.
What is 15% of 200? | 15% of 200 is 30.
Who won the World Cup in 2018? | France won the 2018 World Cup, beating Croatia 4-2.
Describe the water cycle. | Water evaporates, condenses into clouds, falls as precipitation and collects in rivers and oceans.
"""
REALISTIC: tuple[tuple[str, str], ...] = tuple(
    (line.split(" | ")[0], line.split(" | ")[1]) for line in _REALISTIC_LINES.strip().splitlines())

_REPLACEMENTS = {
    "is": "was", "was": "is", "are": "were", "has": "had", "will": "would", "can": "could",
    "refund": "refunded", "booked": "book", "shows": "showed", "increased": "increases",
    "failed": "fails", "use": "used", "starts": "started", "live": "lived", "runs": "ran",
    "opens": "opened", "takes": "took", "won": "wins", "wrote": "writes", "sent": "sends",
    "scheduled": "schedules", "cancelled": "canceled", "Paris": "Lyon", "blue": "red",
    "good": "great", "terrible": "awful", "sorry": "glad", "love": "hate",
}


def _variant(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    out = []
    for word in words:
        roll = rng.random()
        if roll < 0.12:
            continue
        if roll < 0.3 and word.strip(".,!?") in _REPLACEMENTS:
            core = word.strip(".,!?")
            word = word.replace(core, _REPLACEMENTS[core])
        out.append(word)
    if rng.random() < 0.2:
        rng.shuffle(out)
    joined = " ".join(out)
    roll = rng.random()
    if roll < 0.08:
        joined = joined.upper()
    elif roll < 0.16:
        joined = joined.lower()
    elif roll < 0.22:
        joined = joined.replace(".", "!").replace(",", " ")
    return joined


def corpus(count: int = 400, seed: int = 1616) -> list[tuple[str, str]]:
    """The fixed corpus: every realistic pair, then generated pairs up to `count`."""
    rng = random.Random(seed)
    texts = [text for pair in REALISTIC for text in pair]
    cases = list(REALISTIC) + [("", ""), ("Hello", ""), ("", "Hello there.")]
    while len(cases) < count:
        kind = rng.random()
        question, answer = rng.choice(REALISTIC)
        if kind < 0.35:  # the answer, reworded
            cases.append((question if rng.random() < 0.5 else answer, _variant(rng, answer)))
        elif kind < 0.6:  # the question, reworded
            cases.append((question, _variant(rng, question)))
        elif kind < 0.8:  # two answers merged against one of them
            other = rng.choice(texts)
            cases.append((answer, f"{_variant(rng, answer)} {other}"))
        else:  # unrelated texts
            cases.append((rng.choice(texts), rng.choice(texts)))
    return cases


# Words and marks the sentiment tokenizer treats specially: AFINN words (some multi-word
# entries), negators (with and without apostrophes, and `constructor`, which the reference
# counts as one), emoji (scored and unscored), the marks it turns into spaces, sentence ends.
_TONE_WORDS = (
    "good", "great", "bad", "terrible", "love", "hate", "happy", "sad", "not", "don't", "dont",
    "isn't", "won't", "cant", "non", "constructor", "toString", "no", "never", "very", "the",
    "service", "was", "excellent", "awful", "thanks", "sorry", "problem", "fixed", "refund",
    "Good", "GREAT", "can't stand", "fed up", "cover-up", "gr8", "😂", "❤", "😭", "🙂", "👍",
    "😡", "🐍", "café", "naïve", "ΣΟΦΟΣ", "İyi", "東京", "42", "3.5", "hello", "world",
    ".", ",", "!", "?", "...", "?!", "/", "#", "$", "%", "^", "&", "*", ";", ":", "{", "}", "=",
    "_", "`", '"', "~", "(", ")", "'", "-", "<", ">", "[", "]", "|", "\\", "+", "@",
)
_TONE_SPACES = (" ", " ", " ", "  ", "\n", "\t", "\r\n", "\xa0", "\u2028", "\ufeff", "\x85",
                "\x1c", "")


def tone_texts(count: int = 400, seed: int = 2165) -> list[str]:
    """Texts for the tone scorer: the realistic ones, then generated ones up to `count`."""
    rng = random.Random(seed)
    texts = [text for pair in REALISTIC for text in pair] + ["", " ", ".", "not good", "!!!"]
    while len(texts) < count:
        parts = []
        for _ in range(rng.choice((1, 2, 3, 5, 8, 13, 21))):
            parts += [rng.choice(_TONE_WORDS), rng.choice(_TONE_SPACES)]
        text = "".join(parts)
        texts.append(text.strip() if rng.random() < 0.5 else text)
    return texts


# Held out: written after the completeness rules were tuned on the corpus above, and never
# used to tune them, so their agreement figure says how the rules do on unseen text.
_HELD_OUT_LINES = """
How do I export my contacts to a CSV file? | Open Settings, choose Contacts, then click Export and pick CSV.
What's the difference between a virus and a bacterium? | Bacteria are living cells that can reproduce on their own, while viruses need a host cell.
Please move my dentist appointment to Thursday afternoon. | I moved your dentist appointment to Thursday at 2:15 pm.
Why was my card declined? | Your bank declined the payment because the card has expired.
Which laptop would you recommend for video editing? | I'd recommend a laptop with at least 32 GB of memory and a dedicated graphics card.
Can you summarize the meeting notes from yesterday? | The team agreed to delay the launch by two weeks and hire another designer.
How much does the premium plan cost per month? | The premium plan costs $19 per month, billed annually.
My order arrived damaged. What should I do? | Sorry about that! Send us a photo of the damage and we'll ship a replacement today.
What causes the seasons on Earth? | The tilt of Earth's axis changes how directly sunlight hits each hemisphere during the year.
Is it safe to drink tap water in Lisbon? | Yes, tap water in Lisbon is safe to drink.
How do I undo my last commit in git? | Run git reset --soft HEAD~1 to undo the commit but keep your changes.
Add milk, eggs and bread to my shopping list. | I've added milk, eggs and bread to your shopping list.
When does the next train to Munich leave? | The next train to Munich leaves at 17:05 from platform 4.
Why do cats purr? | Cats purr when they are content, but also when they are stressed or hurt.
Write a short thank-you note to my neighbor. | Dear Anna, thank you so much for watering my plants while I was away!
The printer says it is out of paper but the tray is full. | Try removing the paper, fanning the stack and loading it again; the sensor may be stuck.
How many calories are in a banana? | A medium banana has about 105 calories.
What is the return policy for shoes? | Shoes can be returned within 60 days if they are unworn and in the original box.
Can you explain what an API is? | An API is a set of rules that lets one program request data or actions from another.
Who painted the Mona Lisa? | Leonardo da Vinci painted the Mona Lisa in the early 1500s.
Turn off the living room lights at 11 pm. | Okay, the living room lights will turn off at 11 pm.
I forgot my username. | I've sent your username to the email address on your account.
What are the symptoms of dehydration? | Thirst, dark urine, tiredness and dizziness are common symptoms of dehydration.
Should I use tabs or spaces in Python? | PEP 8 recommends four spaces per indentation level.
How far is the Moon from Earth? | The Moon is about 384,400 kilometres from Earth on average.
Tell me about your refund policy for digital products. | Digital products can't be refunded once they have been downloaded.
Why is my phone battery draining so fast? | Apps running in the background and high screen brightness often drain the battery.
Find a hotel near the conference center under $150. | The Parkside Inn is a ten-minute walk from the conference center and costs $139 a night.
How do I make a strong password? | Use at least 12 characters that mix words, numbers and symbols, and never reuse it.
What happened at the Battle of Hastings? | In 1066 William of Normandy defeated King Harold, which began the Norman conquest of England.
The chatbot keeps giving me wrong answers. | I'm sorry it has been unhelpful; could you share an example so we can look into it?
Can I bring my dog on the flight? | Small dogs can travel in the cabin if they stay in a carrier under the seat.
Convert 5 miles to kilometers. | 5 miles is about 8.05 kilometers.
What does the error 'permission denied' mean? | It means your user account is not allowed to read or change that file.
Recommend a podcast about science. | Try 'Radiolab'; it explores science and philosophy through stories.
How long should I boil an egg? | Boil it for about 7 minutes for a jammy yolk, or 10 minutes for a hard one.
Remind me to call mom on Sunday. | I'll remind you to call your mom on Sunday at 10 am.
Why did the stock market fall today? | Stocks fell after the central bank signalled that interest rates would stay high.
Is the museum wheelchair accessible? | Yes, every floor of the museum can be reached by elevator and ramps.
What's a good name for a bakery? | How about 'Rise and Shine Bakery'?
"""
HELD_OUT: tuple[tuple[str, str], ...] = tuple(
    (line.split(" | ")[0], line.split(" | ")[1]) for line in _HELD_OUT_LINES.strip().splitlines())


def held_out_corpus(count: int = 200, seed: int = 4242) -> list[tuple[str, str]]:
    """The held-out pairs, then pairs generated from them (as `corpus`) up to `count`."""
    rng = random.Random(seed)
    cases = list(HELD_OUT)
    while len(cases) < count:
        question, answer = rng.choice(HELD_OUT)
        kind = rng.random()
        if kind < 0.4:
            cases.append((question if rng.random() < 0.5 else answer, _variant(rng, answer)))
        elif kind < 0.7:
            cases.append((question, _variant(rng, question)))
        else:
            other = rng.choice(HELD_OUT)[1]
            cases.append((answer, f"{_variant(rng, answer)} {other}"))
    return cases
