"""The reference answer of the test exercise ex90."""


def double(x):
    return 2 * x


def shout(text):
    return text.upper() + "!"
