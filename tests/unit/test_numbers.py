"""Numbers, money, percentages, times and dates spelled out in Spanish, French, German and Japanese
(`inference.text.numbers`), and which language a text's numbers are read in: what VoxCPM2 reads."""

from __future__ import annotations

import pytest

from inference.text.numbers import latin_language, reading, spell_out


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


def test_who_reads_the_numbers_of_each_language():
    assert reading("今日は2026年です。") == "ja" and reading("Tengo 3 perros y un gato.") == "es"
    assert reading("我有3个苹果。") == "grammars" and reading("I have 3 apples.") == "grammars"
    assert reading("上海・北京は") == "ja"  # kana
    assert reading("上海・北京") == "grammars"  # ・ alone is Chinese punctuation too
    # Languages whose numbers are not spelled here: their digits are left to the model.
    for text in (
        "У меня 25 кошек.",
        "저는 25살입니다.",
        "Eu acho que ele vai para casa com 3 amigos.",
        "Ik en jij hebben 3 katten.",
        "Jeg har 3 katter og en hund.",
        "Ho 3 gatti e non sono qui.",
    ):
        assert reading(text) == "", text


@pytest.mark.parametrize(
    "text, lang",
    [
        ("Tengo 1,000,000 de pesos.", "es"),
        ("3 000円です。", "ja"),
        ("1.234.5円", "ja"),
        ("Son " + "9" * 42 + " granos.", "es"),
        ("Cuesta 1000000000000000000000000000000 €.", "es"),
    ],
)
def test_odd_numbers_never_fail_the_text(text, lang):
    assert spell_out(text, lang)  # spelled, or left as written: never an exception


def test_periods_commas_and_ordinals_in_their_own_languages():
    assert spell_out("Son 2.5 kilos.", "es") == "Son dos punto cinco kilos."
    assert spell_out("Son 1,5 kilos.", "es") == "Son uno coma cinco kilos."
    assert spell_out("Tengo 25. Luego me voy.", "es") == "Tengo veinticinco. Luego me voy."
    assert spell_out("Es waren 25. Dann kam er.", "de") == "Es waren fünfundzwanzig. Dann kam er."
    assert spell_out("Il est 1h.", "fr") == "Il est une heure."
    assert spell_out("会議は14:30に", "ja") == "会議は十四時三十分に"


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
