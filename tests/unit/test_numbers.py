"""Numbers, money, percentages, times and dates spelled out in Spanish, French, German and Japanese
(`inference.numbers`), and which language a text's numbers are read in: what VoxCPM2 reads."""

from __future__ import annotations

import pytest

from inference.numbers import language_of, latin_language, spell_out


@pytest.mark.parametrize(
    "text, lang",
    [
        ("Tengo veinte años y vivo en la ciudad.", "es"),
        ("Je suis dans le train pour Paris avec vous.", "fr"),
        ("Ich bin mit dem Zug in der Stadt.", "de"),
        ("I am on the train to the city.", "en"),
        ("OK 25", "en"),  # too few words to tell: English, whose numbers WeTextProcessing reads
    ],
)
def test_a_latin_texts_language_is_told_by_its_common_words(text, lang):
    assert latin_language(text) == lang


def test_japanese_is_told_by_its_kana_and_english_and_chinese_are_not_this_modules():
    assert language_of("今日は2026年です。") == "ja"
    assert language_of("我有3个苹果。") == "" and language_of("I have 3 apples.") == ""


@pytest.mark.parametrize(
    "text, lang, spoken",
    [
        ("Tengo 25 años.", "es", "Tengo veinticinco años."),
        ("Cuesta 5,50 € hoy.", "es", "Cuesta cinco euros con cincuenta céntimos hoy."),
        ("Es el 12/05/2026 a las 14:30.", "es", "Es el doce de mayo de dos mil veintiséis a las catorce y treinta."),
        ("El 50 % de 1.234 personas.", "es", "El cincuenta por ciento de mil doscientos treinta y cuatro personas."),
        ("Il est 14h05 le 1er mai.", "fr", "Il est quatorze heures cinq le premier mai."),
        (
            "Ça coûte 3,20 € pour 2 500 personnes.",
            "fr",
            "Ça coûte trois euros et vingt centimes pour deux mille cinq cents personnes.",
        ),
        ("Es kostet 12 € für 1.500 Gäste.", "de", "Es kostet zwölf Euro für eintausendfünfhundert Gäste."),
        ("Der 3. Mai um 9:15 mit 7 %.", "de", "Der dritte Mai um neun Uhr fünfzehn mit sieben Prozent."),
        (
            "今日は2026年5月12日で、3000円、50%です。",
            "ja",
            "今日は二千二十六年五月十二日で、三千円、五十パーセントです。",
        ),
    ],
)
def test_numbers_money_dates_and_times_are_spelled_in_the_texts_language(text, lang, spoken):
    assert spell_out(text, lang) == spoken
