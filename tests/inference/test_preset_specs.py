"""The classifier preprocessing spec language (core.presets.parse_spec) key by key, and the
``inspect`` description of a choice: a spec read wrong is a classifier fed the wrong input, which
answers wrongly without any error. Pure: no model."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from edge_agent.core.vision.classifier_presets import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    PRESETS,
    apply_key,
    parse_spec,
)
from edge_agent.core.vision.preprocess import ClassifierPreprocess
from edge_agent.errors import ModelError
from edge_agent.inference.preset_choice import Choice, choose_preprocess, model_base

BASE = ClassifierPreprocess(size_hw=(160, 192), layout="NHWC")  # what a model says about itself
W = "classifier.preprocess"


def parse(spec: str) -> ClassifierPreprocess:
    return parse_spec(spec, BASE, W)


# ---- presets --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ultralytics", "imagenet", "raw", " ImageNet ", "RAW"])
def test_a_preset_keeps_the_models_size_and_layout(name: str) -> None:
    pp = parse(name)
    preset = PRESETS[name.strip().lower()]
    assert pp == replace(preset, size_hw=(160, 192), layout="NHWC")


def test_the_preset_table_is_the_documented_recipes() -> None:
    assert PRESETS["ultralytics"] == ClassifierPreprocess()
    im = PRESETS["imagenet"]
    assert (im.crop_ratio, im.mean, im.std, im.scale) == (224 / 256, IMAGENET_MEAN, IMAGENET_STD, 1 / 255)
    assert IMAGENET_MEAN == (0.485, 0.456, 0.406) and IMAGENET_STD == (0.229, 0.224, 0.225)
    raw = PRESETS["raw"]
    assert (raw.resize, raw.center_crop, raw.scale, raw.color) == ("stretch", False, 1.0, "RGB")


def test_keys_after_a_preset_override_it_and_empty_items_are_ignored() -> None:
    pp = parse(" imagenet , order=bgr,, scale = 1/127.5 ,")
    assert pp == replace(PRESETS["imagenet"], size_hw=(160, 192), layout="NHWC", color="BGR", scale=1 / 127.5)
    assert parse("") == BASE  # nothing: the model's own base


# ---- each key ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "resize", "crop"),
    [
        ("shorter", "shorter_side", True),
        ("SHORTER_SIDE", "shorter_side", True),
        ("Stretch", "stretch", False),
    ],
)
def test_resize(value: str, resize: str, crop: bool) -> None:
    pp = parse(f"raw,resize={value}")
    assert (pp.resize, pp.center_crop) == (resize, crop)


@pytest.mark.parametrize(
    ("spec", "crop", "ratio"),
    [
        ("raw,crop=true", True, 1.0),
        ("crop=FALSE", False, 1.0),
        ("raw,crop=0.875", True, 0.875),  # a ratio turns the crop on
        ("crop_ratio=1", True, 1.0),
        ("crop=1e-3", True, 0.001),
    ],
)
def test_crop(spec: str, crop: bool, ratio: float) -> None:
    pp = parse(spec)
    assert (pp.center_crop, pp.crop_ratio) == (crop, ratio)


@pytest.mark.parametrize("value", ["0", "-0.5", "1.0001", "abc", "", "nan"])
def test_a_crop_ratio_outside_0_to_1_is_refused(value: str) -> None:
    with pytest.raises(ModelError, match=rf"^{W}: crop='{value}': expected a ratio in \(0, 1\], e.g. 0.875"):
        parse(f"crop={value}")


@pytest.mark.parametrize(("value", "scale"), [("1/255", 1 / 255), ("0.5", 0.5), ("2/4", 0.5), ("1", 1.0)])
def test_scale_as_a_number_or_a_fraction(value: str, scale: float) -> None:
    assert parse(f"scale={value}").scale == scale


@pytest.mark.parametrize("value", ["1/0", "1/2/3", "a/2", "x", ""])
def test_a_bad_scale_is_refused_naming_it(value: str) -> None:
    with pytest.raises(
        ModelError, match=f"^{W}: scale='{value}': expected a number such as 1/255 or 0.0039$"
    ):
        parse(f"scale={value}")


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("0.5:0.25:0.125", (0.5, 0.25, 0.125)),
        ("0.5 0.25 0.125", (0.5, 0.25, 0.125)),
        ("0.5::0.25:0.125", (0.5, 0.25, 0.125)),
        ("0.5", (0.5, 0.5, 0.5)),  # one value for the three channels
    ],
)
def test_mean_and_std_take_three_numbers_or_one(value: str, want: tuple[float, float, float]) -> None:
    assert parse(f"mean={value}").mean == want
    assert parse(f"std={value}").std == want
    assert parse(f"mean={value}").std == BASE.std  # the other is untouched


def test_json_lists_give_mean_and_std_with_commas() -> None:
    pp = parse(json.dumps({"mean": [0.1, 0.2, 0.3], "std": [0.4, 0.5, 0.6]}))
    assert (pp.mean, pp.std) == ((0.1, 0.2, 0.3), (0.4, 0.5, 0.6))


@pytest.mark.parametrize("value", ["1:2", "1:2:3:4", "a:b:c", "1:2:x"])
def test_mean_needs_three_numbers(value: str) -> None:
    with pytest.raises(ModelError, match=f"^{W}: mean='{value}': expected three numbers a:b:c$"):
        parse(f"mean={value}")


@pytest.mark.parametrize("value", ["0", "1:0:1", "0.2:0.2:0"])
def test_a_zero_std_is_refused_but_a_zero_mean_is_fine(value: str) -> None:
    with pytest.raises(ModelError, match=f"^{W}: std='{value}': must not contain 0$"):
        parse(f"std={value}")
    assert 0.0 in parse(f"mean={value}").mean


@pytest.mark.parametrize(
    ("spec", "color"), [("order=bgr", "BGR"), ("color=Rgb", "RGB"), ("order= BGR ", "BGR")]
)
def test_channel_order(spec: str, color: str) -> None:
    assert parse(spec).color == color


@pytest.mark.parametrize(("spec", "layout"), [("layout=nchw", "NCHW"), ("layout=NHWC", "NHWC")])
def test_layout(spec: str, layout: str) -> None:
    assert parse(spec).layout == layout


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("resize=crop", f"{W}: resize='crop': expected shorter or stretch"),
        ("order=RGBA", f"{W}: order='RGBA': expected RGB or BGR"),
        ("layout=CHW", f"{W}: layout='CHW': expected NCHW or NHWC"),
    ],
)
def test_bad_values_are_one_line_naming_key_and_value(spec: str, message: str) -> None:
    with pytest.raises(ModelError) as err:
        parse(spec)
    assert str(err.value) == message


def test_keys_are_case_and_space_insensitive_values_are_trimmed() -> None:
    assert apply_key(BASE, " ORDER ", " bgr ", W).color == "BGR"
    assert apply_key(BASE, "Crop_Ratio", "0.5", W).crop_ratio == 0.5


def test_an_unknown_key_lists_the_known_ones() -> None:
    with pytest.raises(
        ModelError, match=rf"^{W}: unknown preprocessing key 'size'; known: resize=shorter\|stretch, crop="
    ):
        parse("size=224")


# ---- JSON (model metadata written by other tools) -----------------------------------------------
def test_json_preset_then_keys_and_the_input_size_always_from_the_model() -> None:
    spec = json.dumps(
        {"preset": "imagenet", "order": "BGR", "crop": False, "size": 999, "interpolation": "bilinear"}
    )
    pp = parse(spec)
    assert pp == replace(
        PRESETS["imagenet"], size_hw=(160, 192), layout="NHWC", color="BGR", center_crop=False
    )


def test_json_resize_shorter_side_and_crop_ratio_as_numbers() -> None:
    pp = parse(json.dumps({"preset": "raw", "resize": "shorter_side", "crop_ratio": 0.875, "scale": 0.5}))
    assert (pp.resize, pp.center_crop, pp.crop_ratio, pp.scale) == ("shorter_side", True, 0.875, 0.5)
    assert parse(json.dumps({"crop": True})).center_crop is True
    assert parse(json.dumps({"preset": "raw", "crop": True})).center_crop is True


@pytest.mark.parametrize("text", ["{not json", '{"a": 1', "{" + "x" * 200])
def test_bad_json_is_one_line_quoting_at_most_80_characters(text: str) -> None:
    with pytest.raises(ModelError) as err:
        parse(text)
    assert str(err.value) == f"{W}: preprocess is not JSON: {text[:80]!r}"


def test_a_json_array_is_refused_as_not_an_object() -> None:
    # only a "{" starts the JSON form; a JSON array is read as a preset name and refused as one
    with pytest.raises(ModelError, match=r"unknown preprocessing preset '\[1'"):
        parse("[1, 2]")


def test_json_extras_and_booleans_do_not_stop_the_keys_after_them(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("DEBUG", logger="edge_agent.core.vision.classifier_presets"):
        pp = parse(json.dumps({"size": 224, "crop": False, "order": "BGR", "preset_name": "x", "std": 0.5}))
    assert (pp.center_crop, pp.color, pp.std) == (False, "BGR", (0.5, 0.5, 0.5))
    assert caplog.messages == [
        f"{W}: preprocess key 'size' ignored",
        f"{W}: preprocess key 'preset_name' ignored",
    ]


def test_json_bad_values_are_refused_like_the_text_form() -> None:
    with pytest.raises(ModelError, match=f"^{W}: unknown preprocessing preset 'imagenett'"):
        parse(json.dumps({"preset": "imagenett"}))
    with pytest.raises(ModelError, match=f"^{W}: std='0:1:1': must not contain 0$"):
        parse(json.dumps({"std": [0, 1, 1]}))


# ---- the choice and its description ------------------------------------------------------------
def fake_model(shape: list[object], meta: dict[str, str] | None = None, task: str | None = None,
               out: list[object] | None = None) -> SimpleNamespace:  # fmt: skip
    """Just what choose_preprocess reads from an OnnxModel."""
    h, w = (shape[1], shape[2]) if shape[3] in (1, 3) and shape[1] not in (1, 3) else (shape[2], shape[3])
    return SimpleNamespace(
        path="m.onnx",
        input=SimpleNamespace(shape=shape),
        input_hw=lambda default=(224, 224): (h, w) if isinstance(h, int) and isinstance(w, int) else default,
        info=SimpleNamespace(
            metadata=meta or {}, task=task, outputs=[SimpleNamespace(shape=[1, 10] if out is None else out)]
        ),
    )


@pytest.mark.parametrize(
    ("shape", "layout"),
    [([1, 3, 224, 224], "NCHW"), ([1, 224, 224, 3], "NHWC"), ([1, 96, 96, 1], "NHWC"), ([1, 1, 96, 96], "NCHW"),
     ([1, 3, 3, 3], "NCHW"), ([1, 1, 1, 1], "NCHW"), ([1, 3, 224, 3], "NCHW"), ([1, 224, 1, 3], "NHWC")],
)  # fmt: skip
def test_the_layout_comes_from_where_the_channels_are(shape: list[object], layout: str) -> None:
    assert model_base(fake_model(shape)).layout == layout


def test_choice_describes_recipe_and_source_in_one_line() -> None:
    m = fake_model([1, 3, 160, 192])
    c = choose_preprocess(m, "imagenet")
    assert c.describe() == (
        "imagenet (option): shorter side to 219 + centre crop 192x160, RGB, x0.00392157, "
        "mean [0.485, 0.456, 0.406], std [0.229, 0.224, 0.225], NCHW"
    )
    c = choose_preprocess(m, "raw,order=BGR")
    assert (
        c.describe()
        == "raw,order=BGR (option): stretch 192x160, BGR, x1, mean [0.0, 0.0, 0.0], std [1.0, 1.0, 1.0], NCHW"
    )
    # shorter-side resize without the crop is a stretch to the input size
    c = Choice(replace(ClassifierPreprocess(), center_crop=False), "x", "metadata")
    assert c.describe().startswith("x (metadata): stretch 224x224,") and not c.is_guess


def test_option_beats_metadata_with_a_warning_and_auto_means_no_option(
    caplog: pytest.LogCaptureFixture,
) -> None:
    m = fake_model([1, 3, 224, 224], meta={"preprocess": "raw"})
    with caplog.at_level("WARNING"):
        c = choose_preprocess(m, " imagenet ")
    assert (c.spec, c.source) == ("imagenet", "option")
    assert caplog.messages == [
        "m.onnx: --classifier-preprocess/[classifier] preprocess ' imagenet ' overrides the model's metadata 'raw'"
    ]
    for opt in (None, "", "  ", "auto", " AUTO "):
        assert (choose_preprocess(m, opt).spec, choose_preprocess(m, opt).source) == ("raw", "metadata")
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert choose_preprocess(fake_model([1, 3, 224, 224]), "raw").source == "option"
    assert caplog.text == ""  # nothing overridden: no warning


def test_a_bad_option_names_the_setting() -> None:
    with pytest.raises(ModelError, match=r"^classifier preprocess: unknown preprocessing preset 'imagenett'"):
        choose_preprocess(fake_model([1, 3, 224, 224], meta={"preprocess": "raw"}), "imagenett")


def test_a_bad_metadata_spec_names_the_model_and_the_entry() -> None:
    with pytest.raises(
        ModelError, match=r"^m\.onnx: metadata 'preprocess': unknown preprocessing preset 'imagenett'"
    ):
        choose_preprocess(fake_model([1, 3, 224, 224], meta={"preprocess": "imagenett"}))


@pytest.mark.parametrize(
    ("task", "out", "want"),
    [
        ("classify", [1, 1000], ("ultralytics", "metadata")),  # Ultralytics' own, even at 1000 classes
        (None, [1, 1000], ("imagenet", "guess")),
        (None, [1, 1001], ("imagenet", "guess")),
        (None, [1, 999], ("ultralytics", "guess")),
        (None, [], ("ultralytics", "guess")),
    ],
)
def test_without_a_spec_ultralytics_metadata_then_the_class_count_guess(
    task: str | None, out: list[object], want: tuple[str, str]
) -> None:
    c = choose_preprocess(fake_model([1, 3, 224, 224], task=task, out=out))
    assert (c.spec, c.source) == want and c.is_guess is (want[1] == "guess")
    assert c.pp.size_hw == (224, 224)


def test_json_strings_booleans_and_resize_forms_read_like_the_text_form() -> None:
    pp = parse(json.dumps({"mean": "0.1,0.2,0.3", "std": "0.5 0.5 0.5", "resize": "stretch"}))
    assert (pp.mean, pp.std, pp.resize, pp.center_crop) == (
        (0.1, 0.2, 0.3),
        (0.5, 0.5, 0.5),
        "stretch",
        False,
    )
    assert parse(json.dumps({"preset": "raw", "resize": "shorter_side"})).resize == "shorter_side"
    assert parse(json.dumps({"preset": "raw", "crop": True})).center_crop is True
    assert parse(json.dumps({"crop": False})).center_crop is False
    with pytest.raises(ModelError, match=f"^{W}: order='True': expected RGB or BGR$"):
        parse(json.dumps({"order": True}))


def test_a_value_holding_an_equals_sign_is_that_keys_value() -> None:
    with pytest.raises(ModelError, match=f"^{W}: order='BGR=x': expected RGB or BGR$"):
        parse("order=BGR=x")


def test_an_unknown_preset_lists_the_presets() -> None:
    with pytest.raises(
        ModelError, match=f"^{W}: unknown preprocessing preset 'vgg'; presets: ultralytics, imagenet, raw; or"
    ):
        parse("vgg")


def test_a_model_without_a_fixed_size_gets_224() -> None:
    assert model_base(fake_model(["N", 3, "H", "W"])).size_hw == (224, 224)


def test_a_stretch_resize_is_described_as_one_even_with_a_crop_flag() -> None:
    c = Choice(ClassifierPreprocess(resize="stretch", center_crop=True), "x", "option")
    assert c.describe().startswith("x (option): stretch 224x224,")
